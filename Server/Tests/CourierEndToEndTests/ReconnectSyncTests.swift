// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierStorage
import CourierDomain
import CourierTestSupport
import Foundation
import Testing

/// ADR 0017, sync that costs what changed: a device that comes back after a short absence sends the cursor
/// its last sync ended with, names no conversation, and gets back the conversations that changed while it was away —
/// new entries, or receipts in its view — and nothing else. Seen on the wire: the device's SDK talks through a proxy
/// that records every frame each side sends.
@Suite("Reconnecting costs what changed", .timeLimit(.minutes(5)))
struct ReconnectSyncTests {
    /// The JSON objects of the frames in `texts` whose `type` (and, when given, `request`) match.
    static func frames(_ texts: [String], type: String, request: String? = nil) -> [[String: Any]] {
        texts.compactMap { text in
            guard let frame = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                frame["type"] as? String == type, request == nil || frame["request"] as? String == request
            else { return nil }
            return frame
        }
    }

    /// Bob's SDK client, through `proxy`.
    static func bob(
        _ server: TestServer,
        through proxy: ChaosProxy,
        checkpoint: Duration?,
        deliveryReceipts: Bool = true
    ) throws -> CourierClient {
        try server.client(device: "phone") {
            $0.serverURL = URL(string: "ws://127.0.0.1:\(proxy.port)/v1/ws")!
            $0.syncCheckpointInterval = checkpoint
            $0.sendsDeliveryReceipts = deliveryReceipts
        }
    }

    /// The sync request a device sent after the first `since` frames, and the server's ack to it.
    static func lastSync(
        _ proxy: ChaosProxy,
        sentAfter sent: Int,
        receivedAfter received: Int
    ) throws -> (request: [String: Any], ack: [String: Any]) {
        let syncs = frames(Array(proxy.clientTexts[sent...]), type: "sync")
        let frame = try #require(syncs.last)
        let acks = frames(Array(proxy.serverTexts[received...]), type: "ack", request: "sync")
            .filter { $0["id"] as? String == frame["id"] as? String }
        return (try #require(frame["data"] as? [String: Any]), try #require(acks.first?["data"] as? [String: Any]))
    }

    static func states(_ ack: [String: Any]) -> [String] {
        (ack["conversations"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }.sorted()
    }

    static func bodies(_ ack: [String: Any]) -> [String] {
        (ack["messages"] as? [[String: Any]] ?? []).compactMap { $0["body"] as? String }
    }

    @Test("a reconnect sends its cursor, no conversation list, and gets only the conversations that changed", arguments: ServerBackend.available)
    func reconnectSendsOnlyWhatChanged(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let peers: [AccountID] = (1...6).map { AccountID(rawValue: "peer\($0)") }
            try await server.register("bob")
            for peer in peers { try await server.register(peer) }
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let bob = try Self.bob(server, through: proxy, checkpoint: nil, deliveryReceipts: false)
            var clients: [AccountID: CourierClient] = [:]
            for peer in peers { clients[peer] = try await server.connectedClient(peer) }
            let events = bob.events()
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            // Bob is in six conversations, all of which got entries live, and has written to peer3.
            for peer in peers { try await clients[peer]!.send("hello from \(peer)", to: .direct("bob", peer)).stored() }
            _ = try await events.collect(6) { $0.receivedMessage }
            let peer3Events = clients["peer3"]!.events()
            let toPeer3 = try await bob.send("hi peer3", to: .direct("bob", "peer3")).stored()
            _ = try await peer3Events.first { $0.receivedMessage?.body == "hi peer3" }
            await bob.disconnect()

            // A reconnect right away: the cursor predates the live traffic, so the six come back, but as states only:
            // the device names the conversations it got entries in live, and no entry is sent twice.
            var sent = proxy.clientTexts.count
            var received = proxy.serverTexts.count
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            var sync = try Self.lastSync(proxy, sentAfter: sent, receivedAfter: received)
            #expect(sync.request["since"] is String, "the cursor the last sync ended with")
            #expect((sync.request["cursors"] as? [String: Any])?.count == 6)
            #expect(Self.states(sync.ack).count == 6)
            #expect(Self.bodies(sync.ack).isEmpty)
            await bob.disconnect()

            // While Bob is away: two peers write, one reads what Bob wrote; the other three do nothing.
            try await clients["peer1"]!.send("while away 1", to: .direct("bob", "peer1")).stored()
            try await clients["peer2"]!.send("while away 2", to: .direct("bob", "peer2")).stored()
            try await clients["peer3"]!.markConversationRead(.direct("bob", "peer3"))
            sent = proxy.clientTexts.count
            received = proxy.serverTexts.count
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            sync = try Self.lastSync(proxy, sentAfter: sent, receivedAfter: received)
            #expect(sync.request["since"] is String)
            #expect((sync.request["cursors"] as? [String: Any] ?? [:]).isEmpty, "no list of what the device holds")
            #expect(
                Self.states(sync.ack)
                    == [ConversationID.direct("bob", "peer1"), .direct("bob", "peer2"), .direct("bob", "peer3")]
                    .map(\.rawValue).sorted()
            )
            #expect(Self.bodies(sync.ack) == ["while away 1", "while away 2"])
            #expect(sync.ack["since"] is String)

            // And the device has it all: the new messages, and peer3's read of Bob's message.
            #expect(try await bob.messages(in: .direct("bob", "peer1")).map(\.body) == ["hello from peer1", "while away 1"])
            #expect(try await bob.messages(in: .direct("bob", "peer2")).map(\.body) == ["hello from peer2", "while away 2"])
            let mine = try await bob.messages(in: .direct("bob", "peer3")).first { $0.id == toPeer3.id }
            #expect(mine?.status == .read)

            // Nothing changed since (Bob's device sends no delivery receipts here: they would be changes after its
            // cursor, made by itself): the next reconnect brings nothing at all.
            await bob.disconnect()
            sent = proxy.clientTexts.count
            received = proxy.serverTexts.count
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            sync = try Self.lastSync(proxy, sentAfter: sent, receivedAfter: received)
            #expect(Self.states(sync.ack).isEmpty && Self.bodies(sync.ack).isEmpty)
            await bob.disconnect()
            for client in clients.values { await client.disconnect() }
            await proxy.shutdown()
        }
    }

    @Test("after live traffic the SDK moves its cursor forward by itself: the reconnect brings only what changed while away")
    func checkpointAfterLiveTraffic() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            // No delivery receipts: sent after the checkpoint, they would be changes after its cursor, made by Bob.
            let bob = try Self.bob(server, through: proxy, checkpoint: .milliseconds(100), deliveryReceipts: false)
            let alice = try await server.connectedClient("alice")
            let carol = try await server.connectedClient("carol")
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            try await alice.send("live", to: .direct("alice", "bob")).stored()
            try await carol.send("live too", to: .direct("bob", "carol")).stored()
            // The connect's sync had no cursor yet: the first request with one is the checkpoint.
            await proxy.clientTexts(containing: #""since""#, count: 1)
            // The session loop sends the outbox after the checkpoint has been applied: once this is acknowledged, the
            // cursor has moved past the live traffic.
            try await bob.send("seen", to: .direct("bob", "carol")).stored()
            await bob.disconnect()

            try await carol.send("while away", to: .direct("bob", "carol")).stored()
            let sent = proxy.clientTexts.count
            let received = proxy.serverTexts.count
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            let sync = try Self.lastSync(proxy, sentAfter: sent, receivedAfter: received)
            #expect(Self.states(sync.ack) == [ConversationID.direct("bob", "carol").rawValue])
            #expect(Self.bodies(sync.ack) == ["while away"])
            #expect(try await bob.messages(in: .direct("bob", "carol")).map(\.body) == ["live too", "seen", "while away"])
            await bob.disconnect()
            await alice.disconnect()
            await carol.disconnect()
            await proxy.shutdown()
        }
    }

    @Test("a cursor from another database is refused with sync.cursorInvalid, and the SDK falls back to naming what it holds")
    func cursorFromAnotherDatabase() async throws {
        let folder = try TemporaryFolder()
        let store = CourierClient.Configuration.StoreLocation.file(URL(fileURLWithPath: folder.path + "/bob.sqlite"))
        try await withTestServer { first in
            try await first.register("alice", "bob")
            let alice = try await first.connectedClient("alice")
            try await alice.send("from the first server", to: .direct("alice", "bob")).stored()
            let bob = try await first.connectedClient("bob", store: store)
            #expect(try await bob.messages(in: .direct("alice", "bob")).count == 1)
            await bob.disconnect()
            await alice.disconnect()
        }
        // A new database: Bob's device holds a cursor the new one never handed out.
        try await withTestServer { second in
            try await second.register("alice", "bob")
            let proxy = try await ChaosProxy(upstreamPort: second.port)
            let alice = try await second.connectedClient("alice")
            // Its log of the conversation is its own: the device, holding seq 1 from the first, gets what follows.
            try await alice.send("seq 1 again", to: .direct("alice", "bob")).stored()
            try await alice.send("from the second server", to: .direct("alice", "bob")).stored()
            let bob = try second.client(device: "phone", store: store) {
                $0.serverURL = URL(string: "ws://127.0.0.1:\(proxy.port)/v1/ws")!
            }
            try await bob.connect(account: "bob", token: try await second.token(for: "bob"))
            let syncs = Self.frames(proxy.clientTexts, type: "sync").compactMap { $0["data"] as? [String: Any] }
            #expect(syncs.count == 2, "the refused one, then one naming what the device holds")
            #expect(syncs.first?["since"] is String)
            #expect(syncs.last?["since"] == nil && syncs.last?["cursors"] is [String: Any])
            #expect(proxy.serverTexts.contains { $0.contains(#""code":"sync.cursorInvalid""#) })
            #expect(try await bob.messages(in: .direct("alice", "bob")).map(\.body).contains("from the second server"))
            await bob.disconnect()
            await alice.disconnect()
            await proxy.shutdown()
        }
    }

    @Test("a since that is malformed, or ahead of this database, is refused with sync.cursorInvalid; the connection stays up")
    func badSince() async throws {
        try await withTestServer { server in
            try await server.register("alice")
            try await server.withRawConnection { raw in
                _ = try await raw.connect(as: "alice", server: server)
                guard case .ack(_, .sync(let first))? = try await raw.request(.sync("s1", SyncRequest(cursors: [:]))),
                    let cursor = first.since
                else {
                    Issue.record("no cursor handed out")
                    return
                }
                let store = cursor.split(separator: ".")[1]
                for (id, since) in [("s2", "garbage"), ("s3", "v1.\(store).999999999"), ("s4", "v1.\(store).x.-.0.d:a:b")] {
                    let reply = try await raw.request(.sync(RequestID(rawValue: id), SyncRequest(cursors: [:], since: since)))
                    guard case .error(let answered, let error)? = reply else {
                        Issue.record("accepted \(since)")
                        continue
                    }
                    #expect(answered == RequestID(rawValue: id) && error.code == .syncCursorInvalid, "\(since)")
                }
                // The cursor it did hand out still works.
                let again = try await raw.request(.sync("s5", SyncRequest(cursors: [:], since: cursor)))
                guard case .ack(_, .sync)? = again else {
                    Issue.record("its own cursor refused: \(String(describing: again))")
                    return
                }
            }
        }
    }

    @Test("a device holding entries past a conversation's last seq (a snapshot put back) is refused with sync.cursorInvalid, with or without since")
    func heldPastTheLog() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let direct = ConversationID.direct("alice", "bob")
            for index in 0..<2 { try await alice.send("m\(index)", to: direct).stored() }
            try await server.withRawConnection { raw in
                _ = try await raw.connect(as: "bob", server: server)
                guard case .ack(_, .sync(let first))? = try await raw.request(.sync("s1", SyncRequest(cursors: [:]))),
                    let cursor = first.since
                else {
                    Issue.record("no cursor handed out")
                    return
                }
                // What it holds, up to the last seq: accepted, either way.
                for (id, since) in [("s2", nil), ("s3", cursor)] as [(String, String?)] {
                    let held = SyncRequest(cursors: [direct: Seq(2)], since: since)
                    guard case .ack(_, .sync)? = try await raw.request(.sync(RequestID(rawValue: id), held)) else {
                        Issue.record("refused what it holds (since \(since ?? "none"))")
                        return
                    }
                }
                // A seq the log never reached: refused, naming the conversation; the connection stays up.
                for (id, since) in [("s4", nil), ("s5", cursor)] as [(String, String?)] {
                    let ahead = SyncRequest(cursors: [direct: Seq(3)], since: since)
                    guard case .error(_, let error)? = try await raw.request(.sync(RequestID(rawValue: id), ahead)) else {
                        Issue.record("accepted seq 3 of a log that ends at 2 (since \(since ?? "none"))")
                        continue
                    }
                    #expect(error.code == .syncCursorInvalid && error.message.contains(direct.rawValue))
                }
                // A conversation the database does not have (purged) is left to the sync.
                let unknown = SyncRequest(cursors: [.direct("bob", "nobody"): Seq(7)], since: cursor)
                guard case .ack(_, .sync)? = try await raw.request(.sync("s6", unknown)) else {
                    Issue.record("refused a conversation the database does not have")
                    return
                }
            }
            await alice.disconnect()
        }
    }
}
