// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierStorage
import CourierDomain
import CourierStoragePostgres
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Two server nodes on loopback sharing one PostgreSQL database (runs when `COURIER_TEST_POSTGRES_URL` is set;
/// `.ci/run` always sets it).
@Suite("Several nodes on one PostgreSQL", .timeLimit(.minutes(5)), .enabled(if: PostgresTestDatabase.isAvailable))
struct MultiNodeTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test(
        "clients on different nodes exchange messages, receipts and recalls; a killed node's clients fail over and lose nothing"
    )
    func twoNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let nodeA = try await TestNode.start(backend: .postgres(url: url))
            let nodeB = try await TestNode.start(backend: .postgres(url: url))
            do {
                try await exchangeAndFailOver(nodeA: nodeA, nodeB: nodeB)
            } catch {
                await nodeA.stop()
                await nodeB.stop()
                throw error
            }
            await nodeB.stop()
        }
    }

    @Test(
        "a group spans nodes: membership changes, messages, acks with content and counts reach devices on either node"
    )
    func groupAcrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await groupAcrossNodes(nodeA: nodeA, nodeB: nodeB)
            }
        }
    }

    @Test(
        "a node reads nothing for another node's changes that none of its devices needs, and fans out those one does",
        .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
    )
    func fanOutOnlyWhatLocalDevicesNeed() async throws {
        // A database of its own that logs every statement with the connection's application_name: which node read
        // what, as PostgreSQL saw it.
        let database = try PostgresServer(
            port: Int.random(in: 10_000..<20_000),
            settings: ["log_statement=all", "log_line_prefix=@@%a@@"]
        )
        defer { database.remove() }
        try await withTwoNodes(on: database.url) { nodeA, nodeB in
            let nodeBStore = try #require(nodeB.server.store as? PostgresStore)
            let nodeBName = PostgresStore.applicationName(of: nodeBStore.nodeID)
            try await nodeA.server.register("alice", "bob", "carol")
            let alice = try await nodeA.server.connectedClient("alice")
            let bob = try await nodeA.server.connectedClient("bob")
            let carol = try await nodeB.server.connectedClient("carol")
            let (bobEvents, carolEvents) = (bob.events(), carol.events())
            // The statements node B ran that read messages or receipts, from `offset` on. Each log entry starts with
            // `@@application_name@@`; a statement's later lines follow without it.
            func nodeBReads(since offset: Int) throws -> [String] {
                let log = try Data(contentsOf: URL(fileURLWithPath: database.logPath))
                let parts = String(decoding: log.dropFirst(offset), as: UTF8.self).components(separatedBy: "@@")
                return stride(from: 1, to: parts.count - 1, by: 2)
                    .filter { parts[$0] == nodeBName }
                    .map { parts[$0 + 1] }
                    .filter { $0.contains("statement:") || $0.contains("execute") }
                    .filter { $0.contains("FROM message") || $0.contains("FROM receipt") }
            }
            let mark = try Data(contentsOf: URL(fileURLWithPath: database.logPath)).count

            // Alice and bob, both on A, exchange 20 messages, deliveries and reads; B has only carol.
            for index in 1...20 { try await alice.send("m\(index)", to: .direct("alice", "bob")).stored() }
            let received = try await bobEvents.collect(20) { $0.receivedMessage }
            try await bob.markRead([received[19].id], in: .direct("alice", "bob"))
            // Node B handles changes in order: once carol has this message, it has handled all of the above.
            let last = try await alice.send("for carol", to: .direct("alice", "carol")).stored()
            _ = try await carolEvents.first { $0.receivedMessage.flatMap { $0.id == last.id ? $0 : nil } }
            // Node B fans out without reading: not the 20 messages of accounts it has no device of, and not carol's
            // message either, which its notification carries (before notifications carried the change, ADR 0025, it
            // read 58 statements for the 20 messages, later at most 4). Carol's own delivery, if her device sends it
            // before this looks, reads her conversation's head.
            let reads = try nodeBReads(since: mark).filter { !$0.contains("m.seq = $2") }
            #expect(reads.isEmpty, "node B read \(reads.count) times:\n\(reads.joined(separator: "\n"))")

            // When bob has a device on B too, B reads and fans out what it needs.
            let bobOnB = try await nodeB.server.connectedClient("bob", device: "tablet")
            let tabletEvents = bobOnB.events()
            let next = try await alice.send("to both of bob's devices", to: .direct("alice", "bob")).stored()
            _ = try await tabletEvents.first { $0.receivedMessage.flatMap { $0.id == next.id ? $0 : nil } }
        }
    }

    @Test("an entry too large for a notification reaches the other node's devices whole (it is read there by seq)")
    func largeEntryAcrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                // Given alice on node A and bob on node B
                try await nodeA.server.register("alice", "bob")
                let alice = try await nodeA.server.connectedClient("alice")
                let bob = try await nodeB.server.connectedClient("bob")
                let bobEvents = bob.events()

                // When alice sends a body past what a notification holds (8,000 bytes), then a short one
                let body = String(repeating: "long read ", count: 2_000)
                let long = try await alice.send(body, to: conversation).stored()
                let short = try await alice.send("and a short one", to: conversation).stored()

                // Then bob's device receives both, whole and in order
                let received = try await bobEvents.collect(2) { $0.receivedMessage }
                #expect(received.map(\.id) == [long.id, short.id])
                #expect(received.first?.body == body)
            }
        }
    }

    @Test("a read too large for a notification reaches the other node's devices: the counts and the reader's state are read there")
    func largeReadAcrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                // Given alice and bob's tablet on node A, bob's phone on node B, and 120 messages asking for receipts
                try await nodeA.server.register("alice", "bob")
                let group = ConversationID.group("readers")
                let alice = try await nodeA.server.connectedClient("alice")
                let tablet = try await nodeA.server.connectedClient("bob", device: "tablet")
                let bob = try await nodeB.server.connectedClient("bob")
                let (aliceEvents, tabletEvents, bobEvents) = (alice.events(), tablet.events(), bob.events())
                let created = try await alice.createGroup("readers", members: ["bob"])
                _ = try await bobEvents.first { $0.receivedMessage.flatMap { $0.id == created.id ? $0 : nil } }
                var sent: Set<MessageID> = []
                for index in 1...120 { sent.insert(try await alice.send("item \(index)", to: group, needsReadReceipt: true).stored().id) }
                _ = try await bobEvents.collect(120) { $0.receivedMessage }

                // When bob reads the group on node B: 120 newly counted messages, past what a notification holds
                try await bob.markConversationRead(group)

                // Then alice on node A hears of every one of them read by bob, and bob's tablet on A of his position
                var read: Set<MessageID> = []
                while read.count < sent.count {
                    let update = try await aliceEvents.first {
                        $0.groupReadReceiptUpdate.flatMap { $0.readers["bob"] != nil ? $0 : nil }
                    }
                    #expect(update.readCount == 1 && update.unreadCount == 0)
                    read.insert(update.messageID)
                }
                #expect(read == sent)
                #expect(try await tabletEvents.first { $0.conversationReadUpdate.flatMap { $0.conversation == group ? $0 : nil } }.unreadCount == 0)
            }
        }
    }

    private func groupAcrossNodes(nodeA: TestNode, nodeB: TestNode) async throws {
        // Given alice on node A, bob and carol on node B.
        try await nodeA.server.register("alice", "bob", "carol")
        let group = ConversationID.group("crew")
        let alice = try await nodeA.server.connectedClient("alice")
        let bob = try await nodeB.server.connectedClient("bob")
        let carol = try await nodeB.server.connectedClient("carol")
        let (aliceEvents, bobEvents, carolEvents) = (alice.events(), bob.events(), carol.events())
        func received(_ events: AsyncStream<CourierEvent>, _ id: MessageID) async throws -> Message {
            try await events.first { $0.receivedMessage.flatMap { $0.id == id ? $0 : nil } }
        }

        // Membership changes committed on A reach B's devices, and B's cached member list follows them.
        let created = try await alice.createGroup("crew", members: ["bob"])
        #expect(try await received(bobEvents, created.id).groupChange?.action == .created)
        let added = try await alice.addMembers(["carol"], to: group)
        #expect(try await received(carolEvents, added.id).groupChange?.accounts == ["carol"])

        // A message asking for receipts reaches both members on B; bob's ack with a note reaches alice on A.
        let message = try await alice.send("standup at 10", to: group, needsReadReceipt: true).stored()
        #expect(try await received(bobEvents, message.id).needsReadReceipt)
        #expect(try await received(carolEvents, message.id).needsReadReceipt)
        try await bob.markRead([message.id], in: group, content: "on my way")
        // Other count updates (a sync's, say) may come first on a loaded machine: the one naming a reader is bob's.
        let update = try await aliceEvents.first { $0.groupReadReceiptUpdate.flatMap { $0.readers.isEmpty ? nil : $0 } }
        #expect(update.messageID == message.id && Array(update.readers.keys) == ["bob"])
        #expect(update.contents == ["bob": "on my way"] && update.readCount == 1 && update.unreadCount == 1)

        // A removal committed on A reaches the removed member on B, and B refuses her the group from then on.
        let removed = try await alice.removeMembers(["carol"], from: group)
        #expect(try await received(carolEvents, removed.id).groupChange?.action == .removed)
        await #expect(throws: CourierError.self) { try await carol.history(in: group) }
        let later = try await alice.send("carol has left", to: group).stored()
        #expect(try await received(bobEvents, later.id).body == "carol has left")
    }

    @Test("when a node's change listener loses its connection, its devices are told to sync once it is back")
    func listenerReconnectAsksForSync() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let node = try await TestNode.start(backend: .postgres(url: url))
            do {
                try await node.server.register("alice")
                // Given the node's listener is up (its first "sync" went out before any device was connected)
                #expect(try await PostgresTestDatabase.waitForListener(ofDatabaseAt: url))
                let event = try await node.server.withRawConnection { connection -> ServerEvent? in
                    _ = try await connection.connect(as: "alice", server: node.server)
                    // When the database ends the listener's connection
                    #expect(try await PostgresTestDatabase.terminateListeners(ofDatabaseAt: url) == 1)
                    // Then, once it listens again, the connected device is told to sync
                    while let frame = try await connection.next() {
                        if case .event(let event) = frame { return event }
                    }
                    return nil
                }
                #expect(event == .syncRequired(SyncRequiredEvent()))
            } catch {
                await node.stop()
                throw error
            }
            await node.stop()
        }
    }

    private func exchangeAndFailOver(nodeA: TestNode, nodeB: TestNode) async throws {
        // Given alice on node A (with B as her fallback) and bob on node B.
        try await nodeA.server.register("alice", "bob")
        let alice = try nodeB.server.client { configuration in
            configuration.serverURL = nodeA.server.webSocketURL
            configuration.alternateServerURLs = [nodeB.server.webSocketURL]
        }
        try await alice.connect(account: "alice", token: try await nodeA.server.token(for: "alice"))
        let bob = try await nodeB.server.connectedClient("bob")
        let aliceEvents = alice.events()
        let bobEvents = bob.events()

        // A message committed on node A reaches bob on node B, and his delivery receipt comes back to A.
        let fromA = try await alice.send("from node A", to: conversation).stored()
        #expect(try await bobEvents.first { $0.receivedMessage }.id == fromA.id)
        #expect(try await aliceEvents.first { $0.deliveryUpdate }.messageIDs == [fromA.id])

        // And the other way round.
        let fromB = try await bob.send("from node B", to: conversation).stored()
        #expect(try await aliceEvents.first { $0.receivedMessage }.id == fromB.id)

        // Reads cross nodes too: bob reads on B; alice on A learns of it, and bob's tablet on A clears its count.
        let tablet = try await nodeA.server.connectedClient("bob", device: "tablet")
        let tabletEvents = tablet.events()
        #expect(try await tablet.unreadCount(in: conversation) == 1)
        try await bob.markConversationRead(conversation)
        #expect(try await aliceEvents.first { $0.readUpdate }.messageIDs == [fromA.id])
        #expect(try await tabletEvents.first { $0.conversationReadUpdate }.unreadCount == 0)
        #expect(try await tablet.unreadCount(in: conversation) == 0)
        await tablet.disconnect()

        // A recall on node A reaches bob on node B.
        let oops = try await alice.send("oops", to: conversation).stored()
        #expect(try await bobEvents.first { $0.receivedMessage }.id == oops.id)
        try await alice.recall(oops.id, in: conversation)
        #expect(try await bobEvents.first { $0.recallNotice }.messageID == oops.id)
        #expect(try await bob.message(oops.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])

        // When node A dies, bob keeps sending; alice fails over to node B and misses nothing.
        await nodeA.kill()
        var sent: [MessageID] = []
        for index in 1...20 { sent.append(try await bob.send("while A is down \(index)", to: conversation).stored().id) }
        let caughtUp = try await aliceEvents.collect(20, timeout: .seconds(30)) { $0.receivedMessage }
        #expect(caughtUp.map(\.id) == sent)
        let stored = try await alice.messages(in: conversation, limit: 100)
        // 3 is the recalled message (listed as `recalled`), 4 the recall notice (never listed).
        #expect(stored.map(\.seq.rawValue) == Array(1...3) + Array(5...24))

        // Her sends work again, through node B.
        let afterFailover = try await alice.send("back", to: conversation).stored()
        #expect(try await bobEvents.first { $0.receivedMessage }.id == afterFailover.id)
    }
}
