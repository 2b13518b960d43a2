// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierTestSupport
import Foundation
import Testing

/// Sync that costs what changed: live entries that come out of order (two commits that raced publish in
/// either order) leave a gap in a device's log; the SDK fills it with one `history` request for the entries missing
/// in that conversation, not with a sync of every conversation. Seen from the wire: the device's SDK talks through a
/// proxy that holds one event back and records every frame the device sends.
@Suite("Gaps in the live log", .timeLimit(.minutes(5)))
struct GapFillTests {
    let direct = ConversationID.direct("alice", "bob")

    /// Bob's SDK client, through `proxy`.
    static func bob(_ server: TestServer, through proxy: ChaosProxy) async throws -> CourierClient {
        let bob = try server.client(device: "phone") {
            $0.serverURL = URL(string: "ws://127.0.0.1:\(proxy.port)/v1/ws")!
        }
        try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
        return bob
    }

    /// The requests a device sent, by type: their data.
    static func requests(_ proxy: ChaosProxy, ofType type: String) -> [[String: Any]] {
        proxy.clientTexts.compactMap { text in
            guard let frame = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                frame["type"] as? String == type
            else { return nil }
            return frame["data"] as? [String: Any] ?? [:]
        }
    }

    @Test("an entry that comes late leaves a gap filled by one history request for what is missing, not a sync")
    func gapFilledByHistory() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let bob = try await Self.bob(server, through: proxy)
            let alice = try await server.connectedClient("alice")
            let carol = try await server.connectedClient("carol")
            let events = bob.events()
            // Bob has two conversations, so a sync would show itself.
            try await carol.send("hi from carol", to: .direct("bob", "carol")).stored()
            try await alice.send("one", to: direct).stored()
            _ = try await events.collect(2) { $0.receivedMessage }

            // "two" reaches Bob after "three", and only once his device has asked for something.
            proxy.holdBack(frameContaining: #""body":"two""#, untilClientSends: [#""history""#, #""sync""#])
            try await alice.send("two", to: direct).stored()
            try await alice.send("three", to: direct).stored()

            let received = try await events.collect(2) { $0.receivedMessage }
            #expect(received.map(\.body) == ["two", "three"], "announced in seq order")
            #expect(proxy.heldBack == 1)
            #expect(try await bob.messages(in: direct).map(\.body) == ["one", "two", "three"])
            let syncs = Self.requests(proxy, ofType: "sync")
            let histories = Self.requests(proxy, ofType: "history")
            #expect(syncs.count == 1, "only the connect's sync, not one for the gap")
            #expect(histories.count == 1)
            #expect(histories.first?["conversation"] as? String == direct.rawValue)
            #expect(histories.first?["before"] as? Int == 3 && histories.first?["limit"] as? Int == 1)
            await proxy.shutdown()
        }
    }

    @Test("a device added to a group starts its log at the entry that added it: no gap to fill, no sync")
    func addedToGroup() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let bob = try await Self.bob(server, through: proxy)
            let carol = try await server.connectedClient("carol")
            let team = ConversationID.group("team")
            _ = try await carol.createGroup("team", members: ["alice"])
            for index in 1...3 { try await carol.send("before \(index)", to: team).stored() }
            let events = bob.events()

            _ = try await carol.addMembers(["bob"], to: team)
            try await carol.send("after", to: team).stored()

            let received = try await events.first { $0.receivedMessage.flatMap { $0.body == "after" ? $0 : nil } }
            #expect(received.seq == 6)
            #expect(try await bob.messages(in: team).map(\.seq) == [5, 6], "the entry that added him, and what followed")
            #expect(Self.requests(proxy, ofType: "sync").count == 1, "only the connect's sync")
            #expect(Self.requests(proxy, ofType: "history").isEmpty)
            await proxy.shutdown()
        }
    }
}
