// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Recall in direct conversations, with real clients on a real server (SPEC §6).
@Suite("Recall end to end", .timeLimit(.minutes(5)))
struct RecallTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("a two-way recall reaches every device: live, the sender's other device, and one offline at the time")
    func twoWay() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let tablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            let laptop = try await server.connectedClient("bob", device: "laptop")
            let bobEvents = bob.events()
            let kept = try await alice.send("kept", to: conversation).stored()
            let secret = try await alice.send("oops", to: conversation).stored()
            _ = try await bobEvents.collect(2) { $0.receivedMessage }
            #expect(try await bob.unreadCount(in: conversation) == 2)
            await laptop.disconnect()
            let tabletEvents = tablet.events()

            let notice = try await alice.recall(secret.id, in: conversation, postscript: "typo", ext: ["k": "1"])

            #expect(notice.messageID == secret.id && notice.recalledBy == "alice" && notice.mode == .twoWay)
            for events in [bobEvents, tabletEvents] {
                let received = try await events.first { $0.recallNotice }
                #expect(received.messageID == secret.id && received.arrival == .online)
                #expect(received.postscript == "typo" && received.ext == ["k": "1"] && received.sender == "alice")
            }
            // The recalled message stays in place, bodiless, with status `recalled` on every device that held it.
            for client in [alice, tablet, bob] {
                #expect(try await client.messages(in: conversation).map(\.id) == [kept.id, secret.id])
                #expect(try await client.message(secret.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])
            }
            #expect(try await bob.unreadCount(in: conversation) == 1)
            #expect(try await server.store.unreadCounts(of: "bob") == [conversation: 1])

            let laptopEvents = laptop.events()
            try await laptop.connect(account: "bob", token: try await server.token(for: "bob"))
            #expect(try await laptopEvents.first { $0.recallNotice }.arrival == .offline)
            #expect(try await laptop.messages(in: conversation).map(\.status) == [.delivered, .recalled])
            #expect(try await laptop.unreadCount(in: conversation) == 1)
            // Paging history over it brings back no body.
            #expect(try await laptop.history(in: conversation).map(\.body) == ["kept", ""])
        }
    }

    @Test("a one-way recall removes the recipients' copies; the sender keeps its copy and is not notified")
    func oneWay() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let tablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let message = try await alice.send("for me only", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            let tabletEvents = tablet.events()

            try await alice.recall(message.id, in: conversation, mode: .oneWay)

            #expect(try await bobEvents.first { $0.recallNotice }.mode == .oneWay)
            #expect(try await bob.message(message.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])
            // alice's next message reaches her tablet after the notice would have: no recall was reported there.
            let sawRecall = Atomic(false)
            try await alice.send("next", to: conversation).stored()
            _ = try await tabletEvents.first { event in
                if event.recallNotice != nil { sawRecall.store(true, ordering: .relaxed) }
                return event.receivedMessage
            }
            let tabletNotified = sawRecall.load(ordering: .relaxed)
            #expect(!tabletNotified)
            #expect(try await alice.message(message.id)?.body == "for me only")
            #expect(try await tablet.message(message.id)?.body == "for me only")
        }
    }

    @Test(
        "after a one-way recall the sender's account keeps the message on every device; everyone else has the tombstone",
        arguments: ServerBackend.available
    )
    func oneWayKeepsTheSendersCopy(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let aliceEvents = alice.events()
            let direct = try await alice.send("for me only", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage?.id == direct.id ? true : nil }
            try await alice.recall(direct.id, in: conversation, mode: .oneWay)
            _ = try await bobEvents.first { $0.recallNotice }

            // In a group the owner recalls bob's message one-way: bob keeps it, alice (who recalled it) does not.
            let group = ConversationID.group("crew")
            _ = try await alice.createGroup("crew", members: ["bob", "carol"])
            let bobs = try await bob.send("bob's words", to: group).stored()
            _ = try await aliceEvents.first { $0.receivedMessage?.id == bobs.id ? true : nil }
            try await alice.recall(bobs.id, in: group, mode: .oneWay)

            let alicesNewPhone = try await server.connectedClient("alice", device: "new-phone")
            #expect(try await alicesNewPhone.message(direct.id)?.body == "for me only")
            #expect(try await alicesNewPhone.history(in: conversation).map(\.body).contains("for me only"))
            #expect(try await alicesNewPhone.message(bobs.id)?.body != "bob's words")

            let bobsNewPhone = try await server.connectedClient("bob", device: "new-phone")
            #expect(try await bobsNewPhone.message(bobs.id)?.body == "bob's words")
            #expect(try await bobsNewPhone.history(in: group).map(\.body).contains("bob's words"))
            #expect(try await bobsNewPhone.message(direct.id)?.body != "for me only")
            #expect(try await !bobsNewPhone.history(in: conversation).map(\.body).contains("for me only"))

            let carol = try await server.connectedClient("carol")
            #expect(try await !carol.history(in: group).map(\.body).contains("bob's words"))
            // What the store serves everyone else is the tombstone.
            #expect(try await server.store.message(direct.id)?.body == "")
        }
    }

    @Test(
        "a new install syncs the recent and unread entries; paging history meets an earlier recall as roaming"
    )
    func roaming() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let phone = try await server.connectedClient("bob")
            let phoneEvents = phone.events()
            var sent: [Message] = []
            for text in ["one", "two", "three", "four"] { sent.append(try await alice.send(text, to: conversation).stored()) }
            _ = try await phoneEvents.collect(4) { $0.receivedMessage }
            try await phone.markConversationRead(conversation)
            try await alice.recall(sent[1].id, in: conversation)  // the notice is seq 5
            _ = try await phoneEvents.first { $0.recallNotice }
            for text in ["six", "seven"] { sent.append(try await alice.send(text, to: conversation).stored()) }
            _ = try await phoneEvents.collect(2) { $0.receivedMessage }
            try await phone.markConversationRead(conversation)
            sent.append(try await alice.send("eight", to: conversation).stored())  // unread
            _ = try await phoneEvents.first { $0.receivedMessage }
            // carol wrote three messages bob has not read: a new install must hold all of them, whatever the limit.
            let carolChat = ConversationID.direct("bob", "carol")
            let carol = try await server.connectedClient("carol")
            for text in ["c1", "c2", "c3"] { try await carol.send(text, to: carolChat).stored() }

            let tablet = try await server.connectedClient("bob", device: "tablet") { $0.initialSyncLimit = 2 }

            #expect(try await tablet.messages(in: conversation).map(\.body) == ["seven", "eight"])
            #expect(try await tablet.unreadCount(in: conversation) == 1)
            #expect(try await tablet.messages(in: carolChat).map(\.body) == ["c1", "c2", "c3"])
            #expect(try await tablet.unreadCount(in: carolChat) == 3)
            let tabletEvents = tablet.events()
            let older = try await tablet.history(in: conversation, before: sent[5].seq, limit: 10)
            #expect(older.map(\.body) == ["one", "", "three", "four", "six"])
            let notice = try await tabletEvents.first { $0.recallNotice }
            #expect(notice.messageID == sent[1].id && notice.recalledBy == "alice")
            #expect(notice.arrival == .roaming)
            #expect(try await tablet.message(sent[1].id)?.status == .recalled)
            #expect(
                try await tablet.messages(in: conversation).map(\.body) == [
                    "one", "", "three", "four", "six", "seven", "eight",
                ]
            )
            #expect(try await tablet.unreadCount(in: conversation) == 1)

            // Once synced, the device gets everything it missed, also in a conversation it has not seen yet.
            await tablet.disconnect()
            let phoneSees = phone.events()
            let newChat = ConversationID.direct("bob", "dave")
            try await server.register("dave")
            let dave = try await server.connectedClient("dave")
            for text in ["d1", "d2", "d3"] { try await dave.send(text, to: newChat).stored() }
            _ = try await phoneSees.collect(3) { $0.receivedMessage }
            try await phone.markConversationRead(newChat)
            try await tablet.connect(account: "bob", token: try await server.token(for: "bob"))
            #expect(try await tablet.messages(in: newChat).map(\.body) == ["d1", "d2", "d3"])
        }
    }

    @Test("the window is enforced at its edge, with an injected clock")
    func window() async throws {
        let clock = Atomic<Int64>(1_700_000_000_000)
        let configure: (inout CourierServerConfiguration) -> Void = { configuration in
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
        }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let first = try await alice.send("one", to: conversation).stored()
            let second = try await alice.send("two", to: conversation).stored()

            clock.add(120_000, ordering: .relaxed)
            try await alice.recall(first.id, in: conversation)

            clock.add(1, ordering: .relaxed)
            let error = await #expect(throws: CourierError.self) { try await alice.recall(second.id, in: conversation) }
            #expect(error?.code == .recallWindowExpired)
            // A repeat of the recall that succeeded is still answered, with the original notice.
            let repeated = try await alice.recall(first.id, in: conversation)
            #expect(repeated.time == Timestamp(milliseconds: 1_700_000_120_000))
            #expect(try await alice.message(second.id)?.body == "two")
        }
    }

    @Test("each refusal has its own code, and nothing changes")
    func refusals() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let fromAlice = try await alice.send("mine", to: conversation).stored()
            let elsewhere = try await alice.send("other chat", to: .direct("alice", "carol")).stored()
            func code(_ operation: () async throws -> Void) async -> ErrorCode? {
                do {
                    try await operation()
                    return nil
                } catch let error as CourierError {
                    return error.code
                } catch {
                    return "unexpected"
                }
            }
            #expect(await code { try await bob.recall(fromAlice.id, in: conversation) } == .recallNotPermitted)
            #expect(await code { try await alice.recall("no-such-id", in: conversation) } == .messageNotFound)
            #expect(await code { try await alice.recall(elsewhere.id, in: conversation) } == .messageNotInConversation)
            #expect(
                await code { try await bob.recall(fromAlice.id, in: .direct("alice", "carol")) }
                    == .conversationNotAMember
            )
            // A message still in the outbox (sent while offline) has nothing to recall on the server.
            let phone = try await server.connectedClient("alice", device: "phone")
            await phone.disconnect()
            let pending = ClientMessageID(rawValue: "queued-offline")
            try await phone.send("later", to: conversation, clientID: pending)  // queued: returns at once
            #expect(try await phone.pendingMessages().map(\.clientID) == [pending])
            #expect(await code { try await phone.recall(sent: pending, in: conversation) } == .recallNotSent)
            #expect(await code { try await phone.recall(sent: "never-sent", in: conversation) } == .messageNotFound)
            #expect(try await bob.message(fromAlice.id)?.body == "mine")

            // Once the outbox went out, the same call recalls it: the chat screen only ever had the client id.
            let bobEvents = bob.events()
            try await phone.connect(account: "alice", token: try await server.token(for: "alice"))
            let delivered = try await bobEvents.first { $0.receivedMessage }
            #expect(delivered.clientID == pending && delivered.body == "later")
            // bob may have it before the phone handled the ack (until then it is in flight: `recall.notSent`).
            _ = try await phone.liveMessages(in: conversation).first { items in
                items.first { $0.clientID == pending && $0.message != nil }
            }
            let notice = try await phone.recall(sent: pending, in: conversation)
            #expect(notice.messageID == delivered.id)
            #expect(try await bobEvents.first { $0.recallNotice }.messageID == delivered.id)
        }
    }

    @Test("malformed recalls on the wire get a stable error and write nothing")
    func malformedRecalls() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let message = try await alice.send("keep me", to: conversation).stored()
            let recalled = try await alice.send("and me", to: conversation).stored()
            try await alice.recall(recalled.id, in: conversation)
            let noticeID = try #require(
                try await server.store.messages(in: conversation, after: .zero, limit: 10).last?.id
            )
            let big = String(repeating: "x", count: 64 * 1024)
            let sideways = RecallMode(rawValue: "sideways")
            let requests: [(RecallRequest, ErrorCode)] = [
                (.init(conversation: conversation, messageID: message.id, mode: sideways), .invalidArgument),
                (.init(conversation: conversation, messageID: message.id, ext: "{not json"), .invalidArgument),
                (.init(conversation: conversation, messageID: message.id, pushPayload: "nope"), .invalidArgument),
                (
                    .init(conversation: conversation, messageID: message.id, postscript: big, pushText: "x"),
                    .invalidArgument
                ),
                (.init(conversation: conversation, messageID: noticeID), .messageNotFound),
            ]
            let before = try await server.store.messages(in: conversation, after: .zero, limit: 10)
            try await server.withRawConnection { connection in
                _ = try await connection.connect(as: "alice", server: server)
                for (index, (request, code)) in requests.enumerated() {
                    let answer = try await connection.request(.recall(RequestID(rawValue: "r\(index)"), request))
                    guard case .error(_, let error) = answer else {
                        Issue.record("accepted \(request)")
                        continue
                    }
                    #expect(error.code == code, "\(request)")
                }
                guard case .ack(_, .ping) = try await connection.request(.ping("alive")) else { throw Unexpected() }
            }
            #expect(try await server.store.messages(in: conversation, after: .zero, limit: 10) == before)
        }
    }

    @Test(
        "unread counts drop with a recall, or count the notice when asked (NIM shouldBeCounted)",
        arguments: [false, true]
    )
    func unreadCounts(countsNotice: Bool) async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            try await alice.send("one", to: conversation).stored()
            let second = try await alice.send("two", to: conversation).stored()
            _ = try await events.collect(2) { $0.receivedMessage }

            try await alice.recall(second.id, in: conversation, countsAsUnread: countsNotice)

            _ = try await events.first { $0.recallNotice }
            let expected = countsNotice ? 2 : 1
            #expect(try await bob.unreadCount(in: conversation) == expected)
            #expect(try await server.store.unreadCounts(of: "bob")[conversation] == expected)
            try await bob.markConversationRead(conversation)
            #expect(try await bob.unreadCount(in: conversation) == 0)
        }
    }

    @Test("previews and quoted excerpts no longer carry a recalled message; a tip can take its place")
    func previewsQuotesAndTips() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let aliceEvents = alice.events()
            let first = try await alice.send("first", to: conversation).stored()
            let quoted = try await alice.send("quote me", to: conversation).stored()
            _ = try await bobEvents.collect(2) { $0.receivedMessage }
            let reply = try await bob.send("replying", to: conversation, replyTo: quoted.id).stored()
            #expect(reply.quote == "quote me" && reply.replyTo == quoted.id)
            #expect(try await aliceEvents.first { $0.receivedMessage }.quote == "quote me")
            try await bob.send("last word", to: conversation).stored()
            _ = try await aliceEvents.first { $0.receivedMessage }

            try await alice.recall(quoted.id, in: conversation)
            _ = try await bobEvents.first { $0.recallNotice }

            for client in [alice, bob] {
                #expect(try await client.message(reply.id)?.quote == nil)
                #expect(try await client.message(reply.id)?.replyTo == quoted.id)
            }
            #expect(try await server.store.message(reply.id)?.quote == nil)
            #expect(try await server.store.message(quoted.id)?.body == "")
            #expect(try await server.store.message(quoted.id)?.isRecalled == true)

            try await alice.recall(first.id, in: conversation)
            let tip = try await alice.insertRecallTip(for: first.id, text: "You recalled a message")
            #expect(tip?.kind == .recallTip && tip?.body == "You recalled a message" && tip?.seq == first.seq)
            #expect(try await alice.messages(in: conversation).first?.kind == .recallTip)
            // Conversation previews: a recalled last message keeps its place with no body, status `recalled`, for the
            // app to show "message recalled" there.
            let latest = try await alice.send("latest", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            try await alice.recall(latest.id, in: conversation)
            _ = try await bobEvents.first { $0.recallNotice }
            for client in [alice, bob] {
                let preview = try await client.conversations().first?.lastMessage
                #expect(preview?.id == latest.id && preview?.status == .recalled && preview?.body == "")
            }
        }
    }
}

/// The app's backend recalls through the REST API, with the app secret and no window unless it names one.
@Suite("Recall from the app's backend", .timeLimit(.minutes(5)))
struct AppRecallTests {
    @Test("POST /v1/conversations/{id}/recall recalls for the sender, past the window, and devices are told")
    func restRecall() async throws {
        let clock = Atomic<Int64>(1_700_000_000_000)
        let configure: (inout CourierServerConfiguration) -> Void = { configuration in
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
        }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let conversation = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let message = try await alice.send("moderated", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            clock.add(3_600_000, ordering: .relaxed)

            // The app may bring its own window (SPEC §6): an hour-old message is past 60 s, within two hours.
            let path = "v1/conversations/\(conversation)/recall"
            let late = try await server.rest("POST", path, body: #"{"messageId":"\#(message.id)","windowSeconds":60}"#)
            #expect(late.code == "recall.windowExpired" && late.status == 403)
            let bad = try await server.rest("POST", path, body: #"{"messageId":"\#(message.id)","windowSeconds":-1}"#)
            #expect(bad.status == 400 && bad.code == "request.invalidArgument")
            #expect(try await server.store.message(message.id)?.isRecalled == false, "a refused recall changes nothing")

            var request = URLRequest(
                url: server.httpURL.appendingPathComponent("v1/conversations/\(conversation)/recall")
            )
            request.httpMethod = "POST"
            request.httpBody = Data(#"{"messageId":"\#(message.id)","postscript":"removed by moderation"}"#.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            let (_, refused) = try await URLSession.shared.data(for: request)
            #expect((refused as? HTTPURLResponse)?.statusCode == 401)
            request.setValue("Bearer \(server.secret.value)", forHTTPHeaderField: "Authorization")
            let (data, accepted) = try await URLSession.shared.data(for: request)
            #expect((accepted as? HTTPURLResponse)?.statusCode == 200)
            let ack = try JSONDecoder().decode(SendAck.self, from: data)
            #expect(ack.message.recall?.recalledBy == "alice" && !ack.duplicate)

            let notice = try await bobEvents.first { $0.recallNotice }
            #expect(notice.messageID == message.id && notice.postscript == "removed by moderation")
            #expect(try await bob.message(message.id).map { [$0.status.rawValue, $0.body] } == ["recalled", ""])
            #expect(try await server.store.message(message.id)?.body == "")
        }
    }

    @Test(
        "the app's backend recalls a group message whose sender has left since, on every backend",
        arguments: ServerBackend.available
    )
    func restRecallAfterSenderLeft(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let group = ConversationID.group("mods")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let aliceEvents = alice.events()
            _ = try await alice.createGroup("mods", members: ["bob", "carol"])
            let spam = try await bob.send("spam", to: group).stored()
            _ = try await aliceEvents.first { $0.receivedMessage?.id == spam.id ? true : nil }
            _ = try await bob.leaveGroup(group)

            let (status, data) = try await server.restResponse(
                "POST",
                "v1/conversations/\(group)/recall",
                body: #"{"messageId":"\#(spam.id)"}"#
            )
            #expect(status == 200, "\(String(decoding: data, as: UTF8.self))")
            let notice = try await aliceEvents.first { $0.recallNotice }
            #expect(notice.messageID == spam.id)
            #expect(try await server.store.message(spam.id)?.body == "")
        }
    }
}

/// SPEC §9 guarantee 6: after a recall, the server's database holds no trace of the body.
@Suite("Recall leaves no trace", .timeLimit(.minutes(5)))
struct RecallStorageTests {
    @Test("the SQLite files contain no byte of a recalled body")
    func noTraceInDatabase() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/courier.sqlite"
        let secret = "SECRET-BODY-\(UUID().uuidString)"
        let conversation = ConversationID.direct("alice", "bob")
        try await withTestServer(location: .file(path)) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let message = try await alice.send(secret, to: conversation).stored()
            try await bob.send("a reply", to: conversation, replyTo: message.id).stored()
            _ = try await events.first { $0.receivedMessage }
            #expect(try folder.filesContain(secret))

            try await alice.recall(message.id, in: conversation)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(files.contains("courier.sqlite"))
        #expect(try !folder.filesContain(secret))
        #expect(try !folder.filesContain(String(secret.prefix(30))))
    }

    @Test("the SQLite files contain no byte of the note a member left with an ack of a recalled group message")
    func noAckNoteInDatabase() async throws {
        let folder = try TemporaryFolder()
        let note = "NOTE-\(UUID().uuidString.prefix(8))"
        let group = ConversationID.group("crew")
        try await withTestServer(location: .file(folder.path + "/courier.sqlite")) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let aliceEvents = alice.events()
            _ = try await alice.createGroup("crew", members: ["bob"])
            let message = try await alice.send("lunch?", to: group, needsReadReceipt: true).stored()
            _ = try await bobEvents.first { $0.receivedMessage?.id == message.id ? true : nil }
            try await bob.markRead([message.id], in: group, content: note)
            _ = try await aliceEvents.first { $0.groupReadReceiptUpdate }
            #expect(try folder.filesContain(note))

            try await alice.recall(message.id, in: group)
        }
        #expect(try !folder.filesContain(note))
    }
}
