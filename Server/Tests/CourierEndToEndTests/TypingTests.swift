// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierSQL
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Typing indicators (ADR 0050), with real SDK clients against a real server on both backends and
/// across two nodes: shown to the other members' devices, run out, ended by a message, never stored, refused for
/// non-members, turned off by the account or the server, rate-limited.
@Suite("Typing indicators", .timeLimit(.minutes(5)))
struct TypingTests {
    let group = ConversationID.group("team")

    /// The typists of `conversation` each time they change, as `events` tells them.
    func typists(_ events: AsyncStream<CourierEvent>, in conversation: ConversationID, timeout: Duration = .seconds(10))
        async throws -> [AccountID]
    {
        try await events.first(timeout: timeout) { event in
            event.typingUpdate.flatMap { $0.conversation == conversation ? $0.accounts : nil }
        }
    }

    @Test(
        "a member's typing reaches the others' devices, runs out, and ends with its message; not its own devices",
        arguments: ServerBackend.available
    )
    func shownAndEnded(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.createGroup("team", members: ["bob", "carol"])
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            let (bobEvents, carolEvents, tabletEvents) = (bob.events(), carol.events(), aliceTablet.events())

            #expect(try await alice.setTyping(true, in: group))
            #expect(try await typists(bobEvents, in: group) == ["alice"])
            #expect(try await typists(carolEvents, in: group) == ["alice"])
            #expect(bob.typingAccounts(in: group) == ["alice"])

            // Unless said again, it runs out on the devices after the server's expiry (six seconds).
            let shown = ContinuousClock.now
            #expect(try await typists(bobEvents, in: group, timeout: .seconds(20)) == [])
            let lasted = ContinuousClock.now - shown
            #expect(lasted >= .milliseconds(TypingEvent.expiresInMs - 1000), "ran out after \(lasted)")
            #expect(bob.typingAccounts(in: group) == [])
            #expect(try await typists(carolEvents, in: group, timeout: .seconds(20)) == [])

            // Typing again, then sending: the message ends it on bob's device, with no stop sent.
            #expect(try await alice.setTyping(true, in: group))
            #expect(try await typists(bobEvents, in: group) == ["alice"])
            let sent = try await alice.send("here it is", to: group).stored()
            #expect(try await typists(bobEvents, in: group) == [])
            let received = try await bobEvents.first { $0.receivedMessage }
            #expect(received.id == sent.id)

            // A stop ends it at once; carol saw the same start and stop.
            #expect(try await alice.setTyping(true, in: group))
            #expect(try await typists(bobEvents, in: group) == ["alice"])
            #expect(try await alice.setTyping(false, in: group))
            #expect(try await typists(bobEvents, in: group) == [])
            // Carol saw the same: typing, ended by the message, typing, stopped.
            let carolSaw = try await carolEvents.collect(4) { event in
                event.typingUpdate.flatMap { $0.conversation == self.group ? $0.accounts : nil }
            }
            #expect(carolSaw == [["alice"], [], ["alice"], []])

            // Alice's own other device never hears of her typing: the first thing it gets is her next message.
            let last = try await alice.send("last", to: group).stored()
            let firstOnTablet = try await tabletEvents.first { event -> String? in
                if event.typingUpdate != nil { return "typing" }
                return event.receivedMessage?.id == last.id ? "message" : nil
            }
            #expect(firstOnTablet == "message")

            // A device that loses its connection drops what it was shown: nobody would tell it they stopped.
            #expect(try await alice.setTyping(true, in: group))
            #expect(try await typists(bobEvents, in: group) == ["alice"])
            await bob.disconnect()
            #expect(try await typists(bobEvents, in: group) == [])
            #expect(bob.typingAccounts(in: group) == [])
        }
    }

    @Test("typing is refused for non-members and told to nobody", arguments: ServerBackend.available)
    func nonMembers(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "mallory")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.createGroup("team", members: ["bob"])
            let bob = try await server.connectedClient("bob")
            let mallory = try await server.connectedClient("mallory")
            let bobEvents = bob.events()

            await #expect(throws: CourierError.notAMember(group)) { try await mallory.setTyping(true, in: group) }
            let direct = ConversationID.direct("alice", "bob")
            await #expect(throws: CourierError.notAMember(direct)) { try await mallory.setTyping(true, in: direct) }
            await #expect(throws: CourierError.self) { try await mallory.setTyping(true, in: .group("nowhere")) }

            // Bob's first event after those is alice's message, not a typing indicator.
            let sent = try await alice.send("hello", to: group).stored()
            let first = try await bobEvents.first { event -> String? in
                if event.typingUpdate != nil { return "typing" }
                return event.receivedMessage?.id == sent.id ? "message" : nil
            }
            #expect(first == "message")
        }
    }

    @Test(
        "an account that turns its indicators off is shown to nobody, on every device; it still sees others'",
        arguments: ServerBackend.available
    )
    func accountSetting(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let aliceEvents = alice.events()
            let bobEvents = bob.events()

            let settings = try await bob.setSendsTypingIndicators(false)
            #expect(settings == TypingSettings(sendTypingIndicators: false, serverShowsTyping: true))
            let bobTablet = try await server.connectedClient("bob", device: "tablet")
            #expect(try await bobTablet.typingSettings().sendTypingIndicators == false)

            // Bob types: answered, told to nobody. Requests about one conversation are handled in order, so had it
            // been told, alice would get it before bob's message.
            #expect(try await bob.setTyping(true, in: direct) == false)
            let sent = try await bob.send("typed quietly", to: direct).stored()
            let first = try await aliceEvents.first { event -> String? in
                if event.typingUpdate != nil { return "typing" }
                return event.receivedMessage?.id == sent.id ? "message" : nil
            }
            #expect(first == "message")

            // Alice's typing still reaches bob; turned on again, bob's reaches alice.
            #expect(try await alice.setTyping(true, in: direct))
            #expect(try await typists(bobEvents, in: direct) == ["alice"])
            #expect(try await bobTablet.setSendsTypingIndicators(true).sendTypingIndicators)
            #expect(try await bobTablet.setTyping(true, in: direct))
            #expect(try await typists(aliceEvents, in: direct) == ["bob"])

            // The app's backend sets the same switch (REST), and reads it back; bob's devices see it.
            let (status, body) = try await server.restResponse(
                "PUT", "/v1/accounts/bob/typing-settings", body: #"{"sendTypingIndicators":false}"#
            )
            #expect(status == 200)
            #expect(try JSONDecoder().decode(TypingSettings.self, from: body).sendTypingIndicators == false)
            let read = try await server.restResponse("GET", "/v1/accounts/bob/typing-settings")
            #expect(try JSONDecoder().decode(TypingSettings.self, from: read.body) == settings)
            #expect(try await bob.typingSettings().sendTypingIndicators == false)
            #expect(try await server.rest("GET", "/v1/accounts/nobody/typing-settings").code == "account.notFound")
        }
    }

    @Test("a server with --typing-indicators false shows nobody's typing")
    func serverSetting() async throws {
        try await withTestServer(configure: { $0.typingIndicators = false }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            #expect(try await alice.typingSettings() == TypingSettings(sendTypingIndicators: true, serverShowsTyping: false))
            #expect(try await alice.setTyping(true, in: direct) == false)
            let sent = try await alice.send("hi", to: direct).stored()
            let first = try await bobEvents.first { event -> String? in
                if event.typingUpdate != nil { return "typing" }
                return event.receivedMessage?.id == sent.id ? "message" : nil
            }
            #expect(first == "message")
        }
    }

    @Test("a thousand indicators leave the database as it was: every table's rows the same", arguments: ServerBackend.available)
    func neverStored(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            // No delivery receipts (they write): the only requests in the window are the indicators.
            let quiet: (inout CourierClient.Configuration) -> Void = { $0.sendsDeliveryReceipts = false }
            let alice = try await server.connectedClient("alice", configure: quiet)
            _ = try await alice.createGroup("team", members: ["bob"])
            let bob = try await server.connectedClient("bob", configure: quiet)
            let bobEvents = bob.events()
            let database = try #require(server.store as? any SQLRunner)
            let before = try await contents(of: database, backend: backend)

            // Start and stop alternate, so the SDK sends each one.
            for index in 0..<1000 { _ = try await alice.setTyping(index % 2 == 0, in: group) }
            // The last (a stop) reached bob: the server handled all of them.
            _ = try await bobEvents.collect(1000, timeout: .seconds(120)) { $0.typingUpdate }

            let after = try await contents(of: database, backend: backend)
            #expect(after.keys.sorted() == before.keys.sorted())
            for (table, rows) in before where after[table] != rows {
                Issue.record("table \(table) changed: \(rows.count) rows before, \(after[table]?.count ?? 0) after")
            }
        }
    }

    /// Every table's rows, each as text, sorted.
    func contents(of database: any SQLRunner, backend: ServerBackend) async throws -> [String: [String]] {
        let tables: SQLQuery =
            backend == .sqlite
            ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            : "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()"
        var contents: [String: [String]] = [:]
        for row in try await database.readRows(tables) {
            let table = try row.string(0)
            let everything: SQLQuery = "SELECT * FROM \(unescaped: table)"
            let rows = try await database.readRows(everything)
            contents[table] = rows.map { "\($0.values)" }.sorted()
        }
        return contents
    }

    @Test(
        "across two nodes: a typist on one node is shown on the other, in a group and a direct conversation",
        .enabled(if: PostgresTestDatabase.isAvailable)
    )
    func acrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("alice", "bob")
                let alice = try await nodeA.server.connectedClient("alice")
                _ = try await alice.createGroup("team", members: ["bob"])
                let bob = try await nodeB.server.connectedClient("bob")
                let bobEvents = bob.events()

                #expect(try await alice.setTyping(true, in: group))
                #expect(try await typists(bobEvents, in: group) == ["alice"])
                let direct = ConversationID.direct("alice", "bob")
                #expect(try await alice.setTyping(true, in: direct))
                #expect(try await typists(bobEvents, in: direct) == ["alice"])
                #expect(try await alice.setTyping(false, in: direct))
                #expect(try await typists(bobEvents, in: direct) == [])
            }
        }
    }

    @Test("a device past its typing rate is refused rate.limited with retryAfterMs; the connection stays up")
    func rateLimited() async throws {
        try await withTestServer(configure: { $0.limits.deviceTypingPerSecond = 1 }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            try await server.withRawConnection { wire in
                _ = try await wire.connect(as: "alice", server: server)
                // One a second, five at once: of eight pipelined indicators the first five are answered, the rest
                // refused.
                for index in 0..<8 {
                    try await wire.send(.typing(RequestID(rawValue: "t\(index)"), TypingRequest(conversation: direct)))
                }
                var refused: [WireError] = []
                for index in 0..<8 {
                    let answer = try await wire.answer(to: RequestID(rawValue: "t\(index)"))
                    if case .error(_, let error) = answer { refused.append(error) }
                }
                #expect(refused.count == 3)
                #expect(refused.allSatisfy { $0.code == .rateLimited && (1...1000).contains($0.retryAfterMs ?? 0) })
                guard case .ack? = try await wire.request(.ping("ping")) else {
                    Issue.record("the connection did not answer a ping after the refusals")
                    return
                }
            }
        }
    }
}
