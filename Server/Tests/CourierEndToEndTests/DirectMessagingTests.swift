// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Testing

// The time limit catches a hang, not slowness: alone the suite takes about 10 s, but its 1,000-message catch-up shares
// two cores with every other suite of the package (a full run is about 4 minutes, and this suite starts first).
@Suite("Direct messaging end to end", .timeLimit(.minutes(6)))
struct DirectMessagingTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("a message reaches both devices of the recipient and the sender's second device at once")
    func onlineFanOut() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice", device: "phone")
            let alice2 = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob", device: "phone")
            let bob2 = try await server.connectedClient("bob", device: "laptop")
            let streams = [alice2.events(), bob.events(), bob2.events()]
            let aliceEvents = alice.events()

            let sent = try await alice.send("hello", to: conversation).stored()

            #expect(sent.seq == 1 && sent.sender == "alice")
            for events in streams {
                let received = try await events.first { $0.receivedMessage }
                #expect(received.id == sent.id && received.body == "hello" && received.seq == 1)
            }
            // The sending device got the message from the ack, not as a received event.
            let delivered = try await aliceEvents.first { $0.deliveryUpdate }
            #expect(delivered.messageIDs == [sent.id])
            #expect(try await alice.messages(in: conversation).map(\.id) == [sent.id])
        }
    }

    @Test("a device offline for 1,000 messages gets all of them on reconnect, in seq order, once")
    func offlineCatchUp() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobFirst = bob.events()
            try await alice.send("before", to: conversation).stored()
            _ = try await bobFirst.first { $0.receivedMessage }
            await bob.disconnect()

            for index in 1...1000 { try await alice.send("m\(index)", to: conversation).stored() }
            let events = bob.events()
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))

            let received = try await events.collect(1000) { $0.receivedMessage }
            #expect(received.map(\.seq.rawValue) == Array(2...1001))
            #expect(received.map(\.body) == (1...1000).map { "m\($0)" })
            let stored = try await bob.messages(in: conversation, limit: 5000)
            #expect(stored.count == 1001)
            #expect(Set(stored.map(\.id)).count == 1001)
        }
    }

    @Test("resending with the same client id after a reconnect returns the original message, stored once")
    func idempotentResend() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let first = try await alice.send("once", to: conversation, clientID: "c-1").stored()
            await alice.disconnect()
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))

            let again = try await alice.send("once", to: conversation, clientID: "c-1").stored()

            #expect(again.id == first.id && again.seq == first.seq)
            let bob = try await server.connectedClient("bob")
            #expect(try await bob.messages(in: conversation).map(\.id) == [first.id])
            #expect(try await server.store.messages(in: conversation, after: .zero, limit: 10).count == 1)
        }
    }

    @Test("a failed send is discarded: it leaves the lists and is never sent, also after a reconnect; a queued one stays")
    func discardFailed() async throws {
        try await withTestServer { server in
            try await server.register("alice")
            let alice = try await server.connectedClient("alice")
            let toCarol = ConversationID.direct("alice", "carol")  // carol is not registered yet: refused
            await #expect(throws: CourierError.self) { try await alice.send("hello?", to: toCarol, clientID: "f-1").stored() }
            #expect(try await alice.pendingMessages(in: toCarol).map(\.status) == [.failed])
            // A live query shows the failed row, then not.
            let rows = alice.liveMessages(in: toCarol)
            _ = try await rows.first(timeout: .seconds(30)) { $0.count == 1 ? $0 : nil }
            #expect(try await alice.discardFailedMessage("f-1"))
            _ = try await rows.first(timeout: .seconds(30)) { $0.isEmpty ? $0 : nil }
            #expect(try await alice.pendingMessages(in: toCarol).isEmpty)
            #expect(try await !alice.discardFailedMessage("f-1"))

            // carol exists now; a reconnect flushes the outbox: nothing of the discarded message goes out.
            try await server.register("carol")
            await alice.disconnect()
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let sent = try await alice.send("second try", to: toCarol, clientID: "f-2").stored()
            #expect(try await server.store.messages(in: toCarol, after: .zero, limit: 10).map(\.id) == [sent.id])
        }
    }

    @Test("a message sent while offline waits in the outbox as sending, and goes out once, in order, on reconnect")
    func offlineSend() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            await alice.disconnect()

            // While offline, send returns once the message is queued.
            try await alice.send("written offline", to: conversation, clientID: "offline-1")
            let pending = try await alice.pendingMessages(in: conversation)
            #expect(pending.map(\.clientID) == ["offline-1"] && pending.first?.status == .sending)

            // Back online, the outbox goes out first, in order, and once.
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            // The outcome is read where it shows — the peer's events, and the sender's own chat rows.
            let online = Task { try? await alice.send("written online", to: conversation, clientID: "online-1").stored() }
            let received = try await bobEvents.collect(2, timeout: .seconds(60)) { $0.receivedMessage }
            #expect(received.map(\.body) == ["written offline", "written online"])
            let rows = try await alice.liveMessages(in: conversation).first(timeout: .seconds(60)) { items in
                items.allSatisfy { $0.message != nil } && items.count == 2 ? items : nil
            }
            #expect(rows.map(\.clientID) == ["offline-1", "online-1"] && rows.last?.message?.seq == 2)
            _ = await online.value
            #expect(try await alice.pendingMessages(in: conversation).isEmpty)
            #expect(try await server.store.messages(in: conversation, after: .zero, limit: 10).count == 2)
        }
    }

    @Test("history pages backwards by seq")
    func historyPaging() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            for index in 1...25 { try await alice.send("h\(index)", to: conversation).stored() }
            let bob = try await server.connectedClient("bob")

            let newest = try await bob.history(in: conversation, limit: 10)
            let older = try await bob.history(in: conversation, before: newest.first?.seq, limit: 10)
            let oldest = try await bob.history(in: conversation, before: older.first?.seq, limit: 10)

            #expect(newest.map(\.seq.rawValue) == Array(16...25))
            #expect(older.map(\.seq.rawValue) == Array(6...15))
            #expect(oldest.map(\.seq.rawValue) == Array(1...5))
        }
    }

    @Test("an acknowledged message survives a server restart and reaches a recipient who connects afterwards")
    func restartLosesNothing() async throws {
        let folder = try TemporaryFolder()
        let location = SQLiteStore.Location.file(folder.path + "/courier.sqlite")
        let sent = try await withTestServer(location: location) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            return try await alice.send("durable", to: conversation).stored()
        }
        try await withTestServer(location: location) { server in
            let bob = try await server.connectedClient("bob")
            let messages = try await bob.messages(in: conversation)
            #expect(messages.map(\.id) == [sent.id])
            #expect(messages.first?.body == "durable")
        }
    }

    @Test("the conversation list shows the newest message of each conversation")
    func conversationList() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            try await alice.send("to bob", to: conversation).stored()
            try await alice.send("to carol", to: .direct("alice", "carol")).stored()

            let list = try await alice.conversations()

            #expect(list.map(\.id) == [.direct("alice", "carol"), conversation])
            #expect(list.first?.lastMessage?.body == "to carol")
            #expect(list.last?.members == ["alice", "bob"])
        }
    }
}
