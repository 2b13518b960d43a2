// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

/// Edits (ADR 0054), with real SDK clients against a real server on both backends and across two
/// nodes: an edit is an entry of the log that reaches devices online and offline, rewrites history and the quotes of
/// replies, is refused where the rules say, and is erased with every other version by a recall.
@Suite("Edits", .timeLimit(.minutes(5)))
struct EditTests {
    let chat = ConversationID.direct("alice", "bob")

    @Test(
        "an edit reaches a device that was away: the new text, editedAt, the reply's quote; no unread, no extra row",
        arguments: ServerBackend.available
    )
    func reachesOfflineDevice(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let original = try await alice.send("see you at 6", to: chat, ext: ["place": "cafe"]).stored()
            let reply = try await bob.send("ok!", to: chat, replyTo: original.id).stored()
            #expect(reply.quote == "see you at 6")
            try await bob.markConversationRead(chat)
            await bob.disconnect()

            // Alice corrects it while bob is away; her own copy shows it at once.
            let edited = try #require(
                try await alice.edit(original.id, in: chat, body: "see you at 7", ext: ["place": "park"])
            )
            #expect(edited.body == "see you at 7" && edited.ext == ["place": "park"])
            #expect(edited.editedAt != nil && edited.editedAt! >= original.time)

            // Bob's device learns it when it connects: the event, the message, the reply's quote; not an unread
            // message, and not a row of its own.
            let events = bob.events()
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            let seen = try await events.first { $0.editedMessage }
            #expect(seen.id == original.id && seen.body == "see you at 7" && seen.editedAt == edited.editedAt)
            let rows = try await bob.messages(in: chat)
            #expect(rows.map(\.body) == ["see you at 7", "ok!"])
            #expect(rows.first?.ext == ["place": "park"])
            #expect(rows.last?.quote == "see you at 7")
            #expect(try await bob.unreadCount(in: chat) == 0)

            // A new install pages history from the server: the latest version with its time, the quote followed.
            let laptop = try await server.connectedClient("bob", device: "laptop")
            let history = try await laptop.history(in: chat)
            #expect(history.map(\.body) == ["see you at 7", "ok!"])
            #expect(history.first?.editedAt == edited.editedAt)
            #expect(history.last?.quote == "see you at 7")
        }
    }

    @Test("only the sender edits; a retry is the same edit; a notice or a recalled message is not edited",
          arguments: ServerBackend.available)
    func refusals(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let message = try await alice.send("hello", to: chat).stored()
            await expectCode(.editNotPermitted) { _ = try await bob.edit(message.id, in: chat, body: "mine now") }

            let key = ClientMessageID(rawValue: "edit-1")
            _ = try await alice.edit(message.id, in: chat, body: "hello!", clientID: key)
            _ = try await alice.edit(message.id, in: chat, body: "hello!", clientID: key)
            let entries = try await server.store.messages(in: chat, after: .zero, limit: 10)
            #expect(entries.filter { $0.edit != nil }.count == 1)
            // An edit entry is a notice: recalling it by its own id is refused (the message is what a recall names).
            let editEntry = try #require(entries.first { $0.edit != nil })
            await expectCode(.messageNotFound) { _ = try await alice.recall(editEntry.id, in: chat) }
            await expectCode(.messageNotFound) { _ = try await alice.edit(editEntry.id, in: chat, body: "x") }

            let notice = try await alice.recall(message.id, in: chat)
            await expectCode(.editRecalled) { _ = try await alice.edit(message.id, in: chat, body: "again") }
            let recallEntry = try #require(try await server.store.messages(in: chat, after: .zero, limit: 10).last)
            #expect(recallEntry.recall?.messageID == notice.messageID)
            await expectCode(.messageNotFound) { _ = try await alice.edit(recallEntry.id, in: chat, body: "x") }
            await expectCode(.messageBodyTooLarge) {
                let second = try await alice.send("short", to: chat).stored()
                _ = try await alice.edit(second.id, in: chat, body: String(repeating: "x", count: 70_000))
            }
        }
    }

    @Test("the window is enforced at its edge for devices; the app's backend edits past it unless it names one")
    func window() async throws {
        let clock = Atomic<Int64>(1_700_000_000_000)
        try await withTestServer(configure: { configuration in
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
            configuration.editWindow = .seconds(600)
        }) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let first = try await alice.send("one", to: chat).stored()
            let second = try await alice.send("two", to: chat).stored()
            // The device knows the deadline from the window the server published, on its own clock (the server's
            // says 2023): ten minutes from the message, which is now.
            let deadline = try #require(try await alice.editDeadline(for: first))
            #expect(abs(deadline.timeIntervalSinceNow - 600) < 5, "\(deadline.timeIntervalSinceNow) s from now")

            clock.add(600_000, ordering: .relaxed)
            _ = try await alice.edit(first.id, in: chat, body: "one, edited")
            clock.add(1, ordering: .relaxed)
            await expectCode(.editWindowExpired) { _ = try await alice.edit(second.id, in: chat, body: "late") }

            let path = "/v1/conversations/\(chat.rawValue)/edit"
            let limited = try await server.rest(
                "POST", path, body: #"{"messageId":"\#(second.id)","clientId":"app-1","body":"x","windowSeconds":60}"#
            )
            #expect(limited.status == 403 && limited.code == "edit.windowExpired")
            let (status, body) = try await server.restResponse(
                "POST", path, body: #"{"messageId":"\#(second.id)","clientId":"app-2","body":"two, by the app"}"#
            )
            #expect(status == 200)
            let ack = try JSONDecoder().decode(SendAck.self, from: body)
            #expect(ack.message.edit?.byApp == true && ack.message.edit?.editedBy == "alice")
            #expect(try await server.store.message(second.id)?.body == "two, by the app")
        }
    }

    @Test("in a group the owner and admins edit members' messages only where the server lets them",
          arguments: ServerBackend.available)
    func groupRoles(backend: ServerBackend) async throws {
        let group = ConversationID.group("crew")
        for adminsEdit in [false, true] {
            try await withTestServer(on: backend, configure: { $0.adminsEditMessages = adminsEdit }) { server in
                try await server.register("alice", "bob", "carol")
                let alice = try await server.connectedClient("alice")
                let bob = try await server.connectedClient("bob")
                let carol = try await server.connectedClient("carol")
                _ = try await alice.createGroup("crew", members: ["bob", "carol"])
                _ = try await alice.setRole(.admin, for: ["bob"], in: group)
                let message = try await carol.send("helo", to: group).stored()
                let aliceMessage = try await alice.send("from the owner", to: group).stored()
                let events = carol.events()

                // An ordinary member never edits someone else's message, nor an admin the owner's.
                await expectCode(.editNotPermitted) { _ = try await carol.edit(aliceMessage.id, in: group, body: "x") }
                await expectCode(.editNotPermitted) { _ = try await bob.edit(aliceMessage.id, in: group, body: "x") }
                if adminsEdit {
                    _ = try await bob.edit(message.id, in: group, body: "hello")
                    let seen = try await events.first { $0.editedMessage }
                    #expect(seen.body == "hello")
                } else {
                    await expectCode(.editNotPermitted) { _ = try await alice.edit(message.id, in: group, body: "x") }
                    _ = try await carol.edit(message.id, in: group, body: "hello")
                }
                #expect(try await alice.history(in: group).first { $0.id == message.id }?.body == "hello")
            }
        }
    }

    @Test("an edit neither brings a hidden conversation back nor moves one up the list; a new message does")
    func listUnmoved() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let old = try await alice.send("the old one", to: chat).stored()
            _ = try await bob.send("hi bob", to: .direct("bob", "carol")).stored()
            let carol = try await server.connectedClient("carol")
            _ = try await carol.send("newer", to: .direct("bob", "carol")).stored()
            _ = try await events.first { $0.receivedMessage.flatMap { $0.body == "newer" ? true : nil } }
            #expect(try await bob.conversations().map(\.id) == [.direct("bob", "carol"), chat])

            // alice fixes her old message: bob's list keeps its order.
            _ = try await alice.edit(old.id, in: chat, body: "the old one, fixed")
            _ = try await events.first { $0.editedMessage }
            #expect(try await bob.conversations().map(\.id) == [.direct("bob", "carol"), chat])

            // bob hides the chat; another edit leaves it hidden, a message shows it again.
            try await bob.setHidden(true, in: chat)
            _ = try await alice.edit(old.id, in: chat, body: "the old one, fixed twice")
            _ = try await events.first { $0.editedMessage.flatMap { $0.body.hasSuffix("twice") ? true : nil } }
            #expect(try await bob.conversations().map(\.id) == [.direct("bob", "carol")])
            _ = try await alice.send("new", to: chat).stored()
            _ = try await events.first { $0.receivedMessage.flatMap { $0.body == "new" ? true : nil } }
            #expect(try await bob.conversations().map(\.id) == [chat, .direct("bob", "carol")])
        }
    }

    @Test("across two nodes: an edit made on one node reaches a member's device on the other",
          .enabled(if: PostgresTestDatabase.isAvailable))
    func acrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("alice", "bob")
                let alice = try await nodeA.server.connectedClient("alice")
                let message = try await alice.send("typo", to: chat).stored()
                let bob = try await nodeB.server.connectedClient("bob")
                let events = bob.events()
                _ = try await alice.edit(message.id, in: chat, body: "no typo")
                let seen = try await events.first { $0.editedMessage }
                #expect(seen.id == message.id && seen.body == "no typo")
                #expect(try await bob.messages(in: chat).map(\.body) == ["no typo"])
            }
        }
    }

    @Test("a recall of an edited message leaves no byte of any version in the SQLite files, webhook events included")
    func recallErasesEveryVersion() async throws {
        let folder = try TemporaryFolder()
        let first = "FIRST-VERSION-\(UUID().uuidString)"
        let second = "SECOND-VERSION-\(UUID().uuidString)"
        try await withTestServer(
            location: .file(folder.path + "/courier.sqlite"),
            configure: { $0.webhooks.allowPrivateAddresses = true }
        ) { server in
            try await server.register("alice", "bob")
            // An endpoint nobody answers: every event's delivery waits, holding its payload.
            let (status, _) = try await server.restResponse("POST", "/v1/webhooks", body: #"{"url":"http://127.0.0.1:1/hook"}"#)
            #expect(status == 201)
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let message = try await alice.send(first, to: chat).stored()
            _ = try await bob.send("a reply", to: chat, replyTo: message.id).stored()
            let events = bob.events()
            _ = try await alice.edit(message.id, in: chat, body: second, ext: ["v": second])
            _ = try await events.first { $0.editedMessage }
            #expect(try await bob.messages(in: chat).last?.quote == String(second.prefix(120)))
            #expect(try folder.filesContain(second))

            try await alice.recall(message.id, in: chat)
            let entries = try await server.store.messages(in: chat, after: .zero, limit: 10)
            #expect(entries.allSatisfy { !$0.body.contains("VERSION") && $0.ext == nil && $0.quote == nil })
        }
        #expect(try !folder.filesContain(first))
        #expect(try !folder.filesContain(second))
        #expect(try !folder.filesContain(String(second.prefix(30))))
    }
}

extension DecisionRaceTests {
    @Test("an edit held while its message is recalled is refused and writes nothing", arguments: ServerBackend.available)
    func editRacingRecall(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .edit)
        let chat = ConversationID.direct("alice", "bob")
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let message = try await alice.send("first", to: chat).stored()
            gate.arm()
            async let edit = outcome { try await alice.edit(message.id, in: chat, body: "EDITED TEXT") }

            // When the message is recalled (from another device) while the edit waits before its transaction.
            await gate.held()
            let phone = try await server.connectedClient("alice", device: "phone")
            try await phone.recall(message.id, in: chat)
            gate.release()

            // Then the edit is refused by what its own transaction reads, and no entry carries its text.
            let refused = await edit
            await expectCode(.editRecalled) { _ = try refused.get() }
            let entries = try await server.store.messages(in: chat, after: .zero, limit: 10)
            #expect(entries.allSatisfy { $0.edit == nil && !$0.body.contains("EDITED") })
        }
    }

    @Test("a recall held while its message is edited erases the edit too", arguments: ServerBackend.available)
    func recallRacingEdit(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .recall)
        let chat = ConversationID.direct("alice", "bob")
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let message = try await alice.send("first", to: chat).stored()
            gate.arm()
            async let recall = outcome { try await alice.recall(message.id, in: chat) }

            // When the message is edited while the recall waits before its transaction.
            await gate.held()
            let phone = try await server.connectedClient("alice", device: "phone")
            _ = try await phone.edit(message.id, in: chat, body: "EDITED TEXT")
            gate.release()

            // Then the recall, deciding from what its transaction reads, erases the edited version as well.
            _ = try await recall.get()
            let entries = try await server.store.messages(in: chat, after: .zero, limit: 10)
            #expect(entries.count == 3)
            #expect(entries.allSatisfy { !$0.body.contains("EDITED") })
            #expect(try await server.store.message(message.id)?.isRecalled == true)
        }
    }
}
