// Courier — Apache-2.0
import CourierSDK
import CourierTestSupport
import CourierWire
import Testing

/// A device away while its account's membership of a group began and ended gets, on its next sync with `since`, the
/// log of that membership — from the entry that added it to the one that removed it — and nothing before or after,
/// whatever cursor it names (ADR 0023).
@Suite("Sync of a membership that ended", .timeLimit(.minutes(5)))
struct EndedMembershipSyncTests {
    @Test("a sync since before a membership began and ended carries its entries only", arguments: ServerBackend.available)
    func endedMembership(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            // Given a group with two messages, and erin's device, which has synced once (no conversations yet)
            try await server.register("alice", "bob", "erin")
            let group = ConversationID.group("crew")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.createGroup("crew", members: ["bob"])
            _ = try await alice.send("before erin", to: group).stored()
            _ = try await alice.send("before erin, again", to: group).stored()
            try await server.withRawConnection { erin in
                _ = try await erin.connect(as: "erin", server: server)
                guard case .ack(_, .sync(let first)) = try await erin.request(.sync("s1", SyncRequest(cursors: [:])))
                else {
                    Issue.record("no sync ack")
                    return
                }
                let since = try #require(first.since)

                // When, while it is away, erin is added, a message is sent, erin is removed, and another is sent
                let added = try await alice.addMembers(["erin"], to: group)
                let during = try await alice.send("while erin is in", to: group).stored()
                let removed = try await alice.removeMembers(["erin"], from: group)
                _ = try await alice.send("after erin left", to: group).stored()

                // Then its sync since then, even naming cursor 0 for the group, carries exactly that membership's log
                let request = SyncRequest(cursors: [group: .zero], since: since)
                guard case .ack(_, .sync(let ack)) = try await erin.request(.sync("s2", request)) else {
                    Issue.record("no sync ack")
                    return
                }
                #expect(ack.messages.filter { $0.conversation == group }.map(\.id) == [added.id, during.id, removed.id])
                let state = try #require(ack.conversations.first { $0.id == group })
                #expect(state.lastSeq == removed.seq && state.members.isEmpty && state.receipts.isEmpty)
                #expect(state.syncFrom == Seq(added.seq.rawValue - 1))
            }
        }
    }
}
