// Courier — Apache-2.0
import CourierSDK
import CourierWire
import Foundation
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Synchronization
import Testing

/// Read receipts in direct conversations with real clients on a real server: the three kinds of read, the sender's
/// view, unread counts across the reader's devices.
@Suite("Read receipts end to end", .timeLimit(.minutes(5)))
struct ReadReceiptTests {
    let conversation = ConversationID.direct("alice", "bob")

    /// alice sends `count` messages; bob (connected) has received them all.
    func exchange(_ server: TestServer, count: Int) async throws -> (CourierClient, CourierClient, [Message]) {
        try await server.register("alice", "bob")
        let alice = try await server.connectedClient("alice")
        let bob = try await server.connectedClient("bob")
        let bobEvents = bob.events()
        let aliceEvents = alice.events()
        var sent: [Message] = []
        for index in 1...count { sent.append(try await alice.send("message \(index)", to: conversation).stored()) }
        _ = try await bobEvents.collect(count) { $0.receivedMessage }
        // Every message is delivered before a test reads: a read must not race bob's delivery of the last ones.
        let last = sent[sent.count - 1].seq
        _ = try await aliceEvents.first { $0.deliveryUpdate.map { $0.watermark.seq >= last } == true ? true : nil }
        return (alice, bob, sent)
    }

    @Test("a message read ack marks exactly that message read, the newest too; reading the rest in any order folds them")
    func messageReadAck() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            let aliceEvents = alice.events()
            #expect(try await bob.unreadCount(in: conversation) == 3)

            try await bob.markRead(sent[1].id, in: conversation)

            var update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.account == "bob" && update.messageIDs == [sent[1].id] && update.watermark.seq == .zero)
            #expect(try await alice.message(sent[1].id)?.status == .read)
            #expect(try await alice.message(sent[0].id)?.status == .delivered)
            #expect(try await bob.message(sent[1].id)?.isReadAcked == true)
            #expect(try await bob.message(sent[0].id)?.isReadAcked == false)
            #expect(try await bob.unreadCount(in: conversation) == 2)

            // The newest message: read alone (ADR 0038), the first one stays unread.
            try await bob.markRead(sent[2].id, in: conversation)

            update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.messageIDs == [sent[2].id] && update.watermark.seq == .zero)
            #expect(try await alice.message(sent[0].id)?.status == .delivered)
            #expect(try await bob.unreadCount(in: conversation) == 1)
            #expect(try await server.store.unreadCounts(of: "bob")[conversation] == 1)

            // The last one read: the three fold into the watermark, no read left one by one.
            try await bob.markRead(sent[0].id, in: conversation)

            update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.messageIDs == [sent[0].id] && update.watermark.seq == sent[2].seq)
            #expect(try await bob.unreadCount(in: conversation) == 0)
            #expect(try await server.store.unreadCounts(of: "bob").isEmpty)
        }
    }

    @Test(
        "Agora's pattern: the text after a voice message is read as it arrives; the voice message stays unread for the sender until it is played",
        arguments: ServerBackend.available
    )
    func voiceMessageStaysUnread(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let (aliceEvents, bobEvents) = (alice.events(), bob.events())
            let clip = Attachment(url: URL(string: "https://cdn.example.com/clip.m4a")!, mimeType: "audio/mp4", duration: 4)
            let voice = try await alice.send(.audio(clip), to: conversation).stored()
            let text = try await alice.send("listen to this", to: conversation).stored()
            _ = try await bobEvents.collect(2) { $0.receivedMessage }

            // bob's screen acks the text, the newest message, as it is shown.
            try await bob.markRead(text.id, in: conversation)
            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.messageIDs == [text.id])
            #expect(try await alice.message(text.id)?.status == .read)
            #expect(try await alice.message(voice.id)?.status.isRead == false)
            #expect(try await bob.unreadCount(in: conversation) == 1)
            #expect(try await server.store.unreadCounts(of: "bob")[conversation] == 1)

            // Played: now it is read, and so is the conversation.
            try await bob.markRead(voice.id, in: conversation)
            let played = try await aliceEvents.first { $0.readUpdate }
            #expect(played.messageIDs == [voice.id] && played.watermark.seq == text.seq)
            #expect(try await alice.message(voice.id)?.status == .read)
            #expect(try await bob.unreadCount(in: conversation) == 0)
            #expect(try await server.store.unreadCounts(of: "bob").isEmpty)
        }
    }

    @Test("a read up to a message (NIM sendMessageReceipt) reads it and everything before, not after; read counts as delivered")
    func readUpToMessage() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            let aliceEvents = alice.events()

            try await bob.markRead(upTo: sent[1].id, in: conversation)

            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.account == "bob" && update.watermark.seq == sent[1].seq)
            #expect(try await bob.unreadCount(in: conversation) == 1)
            let statuses = try await sent.asyncMap { try await alice.message($0.id)?.status }
            #expect(statuses == [.read, .read, .delivered])
            // A read message was delivered first: `isDelivered` says so, `== .delivered` would not.
            #expect(statuses.map { $0?.isDelivered } == [true, true, true])
            #expect(statuses.map { $0?.isRead } == [true, true, false])
            // The local lookup of several ids keeps their order and leaves out what is not here.
            let found = try await alice.messages([sent[2].id, "not-here", sent[0].id]).map(\.id)
            #expect(found == [sent[2].id, sent[0].id])
        }
    }

    @Test("the app's backend reads a direct conversation for a member: the sender sees it read, the reader's devices 0")
    func appRead() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            let aliceEvents = alice.events()
            let bobEvents = bob.events()
            let answer = try await server.rest(
                "POST",
                "v1/conversations/\(conversation)/reads",
                body: #"{"accounts": ["bob"], "seq": \#(sent[1].seq.rawValue)}"#
            )
            #expect(answer.status == 204)
            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.account == "bob" && update.watermark.seq == sent[1].seq)
            #expect(update.messageIDs == [sent[0].id, sent[1].id])
            #expect(try await alice.message(sent[1].id)?.status == .read)
            #expect(try await alice.message(sent[2].id)?.status != .read)
            #expect(try await bobEvents.first { $0.conversationReadUpdate }.unreadCount == 1)
            #expect(try await bob.unreadCount(in: conversation) == 1)
        }
    }

    @Test("a conversation read ack reads everything up to the newest message the reader has")
    func conversationReadAck() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 4)
            let aliceEvents = alice.events()
            let bobEvents = bob.events()

            try await bob.markConversationRead(conversation)

            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.messageIDs == sent.map(\.id) && update.watermark == Watermark(seq: 4, time: sent[3].time))
            let unread = try await bobEvents.first { $0.unreadCountUpdate }
            #expect(unread.unreadCount == 0 && unread.totalUnreadCount == 0)
            #expect(try await alice.messages(in: conversation).allSatisfy { $0.status == .read })
        }
    }

    @Test("a read-up-to-time ack reads every message at or before that time")
    func readUpToTime() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            let aliceEvents = alice.events()

            try await bob.markRead(upTo: sent[1].time, in: conversation)

            let update = try await aliceEvents.first { $0.readUpdate }
            let expected = sent.filter { $0.time <= sent[1].time }
            #expect(update.messageIDs == expected.map(\.id))
            #expect(try await bob.unreadCount(in: conversation) == sent.count - expected.count)
        }
    }

    @Test("unread counts follow arriving messages; own messages never count")
    func unreadCountsFollowMessages() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let events = bob.events()
            try await alice.send("1", to: conversation).stored()
            try await bob.send("mine", to: conversation).stored()
            try await alice.send("2", to: conversation).stored()
            try await carol.send("3", to: .direct("bob", "carol")).stored()

            let updates = try await events.collect(3) { $0.unreadCountUpdate }
            #expect(updates.map(\.unreadCount) == [1, 2, 1])
            #expect(updates.map(\.totalUnreadCount) == [1, 2, 3])
            #expect(try await bob.totalUnreadCount() == 3)
            #expect(try await bob.conversations().first { $0.id == conversation }?.unreadCount == 2)
        }
    }

    @Test("a sender who was offline learns what was read when it reconnects")
    func offlineSenderCatchesUp() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 2)
            await alice.disconnect()
            let bob2 = try await server.connectedClient("bob", device: "tablet")
            let bob2Events = bob2.events()
            try await bob.markRead(sent[0].id, in: conversation)
            _ = try await bob2Events.first { $0.unreadCountUpdate }
            let aliceEvents = alice.events()

            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))

            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.messageIDs == [sent[0].id])
            #expect(try await alice.message(sent[0].id)?.status == .read)
            #expect(try await alice.message(sent[1].id)?.status == .delivered)
        }
    }

    @Test("the reader's other devices get conversationRead and a zero unread count, live and after reconnecting")
    func readerOtherDevices() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            _ = alice
            let tablet = try await server.connectedClient("bob", device: "tablet")
            let laptop = try await server.connectedClient("bob", device: "laptop")
            #expect(try await tablet.unreadCount(in: conversation) == 3)
            await laptop.disconnect()
            let tabletEvents = tablet.events()

            try await bob.markConversationRead(conversation)

            let read = try await tabletEvents.first { $0.conversationReadUpdate }
            #expect(read.conversation == conversation && read.watermark.seq == sent[2].seq && read.unreadCount == 0)
            #expect(try await tablet.unreadCount(in: conversation) == 0)
            #expect(try await tablet.message(sent[0].id)?.isReadAcked == true)

            try await laptop.connect(account: "bob", token: try await server.token(for: "bob"))
            #expect(try await laptop.unreadCount(in: conversation) == 0)
            #expect(try await laptop.totalUnreadCount() == 0)
        }
    }

    @Test("a new device catching up on a read conversation over many sync pages never reports it unread")
    func catchUpNeverShowsReadMessagesUnread() async throws {
        let configure: (inout CourierServerConfiguration) -> Void = { $0.limits.maxPageSize = 20 }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            var sent: [MessageID] = []
            for index in 1...70 { sent.append(try await alice.send("message \(index)", to: conversation).stored().id) }
            // A conversation read covers what this device has: wait until the last message reached it.
            let last = sent.last
            _ = try await bobEvents.first { $0.receivedMessage?.id == last ? true : nil }
            try await bob.markConversationRead(conversation)
            #expect(try await server.store.unreadCounts(of: "bob").isEmpty)

            let laptop = try server.client(device: "laptop")
            let events = laptop.events()
            try await laptop.connect(account: "bob", token: try await server.token(for: "bob"))
            #expect(try await laptop.messages(in: conversation, limit: 100).count == 70)
            // Everything the catch-up reported comes before the next message's count; none of it may be unread.
            let sentinel = try await alice.send("new", to: conversation).stored()
            let reported = Mutex<[Int]>([])
            _ = try await events.first { event -> Bool? in
                if let update = event.unreadCountUpdate { reported.withLock { $0.append(update.unreadCount) } }
                return event.receivedMessage?.id == sentinel.id ? true : nil
            }
            _ = try await events.first { $0.unreadCountUpdate }
            #expect(reported.withLock { $0 }.allSatisfy { $0 == 0 }, "\(reported.withLock { $0 })")
            #expect(try await laptop.unreadCount(in: conversation) == 1)
        }
    }

    @Test("reads made offline apply at once and reach the server on reconnect, each message acked once")
    func offlineReads() async throws {
        try await withTestServer { server in
            let (alice, bob, sent) = try await exchange(server, count: 3)
            await bob.disconnect()
            try await bob.markRead(sent[0].id, in: conversation)
            try await bob.markRead([sent[0].id, sent[1].id], in: conversation)
            #expect(try await bob.unreadCount(in: conversation) == 1)
            let aliceEvents = alice.events()

            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))

            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(Set(update.messageIDs) == [sent[0].id, sent[1].id])
            #expect(try await server.store.readState(of: "bob", in: conversation).unreadCount == 1)
        }
    }
}

/// Read privacy: private reads, account and conversation settings, and the server's policy.
@Suite("Read privacy end to end", .timeLimit(.minutes(5)))
struct ReadPrivacyTests {
    let conversation = ConversationID.direct("alice", "bob")

    /// bob reads alice's message through `read`; checks that alice learns nothing while bob's other device clears
    /// its unread count. alice's events are ordered, so her receiving bob's next message proves no read came first.
    func expectPrivate(
        policy: ReadReceiptPolicy = .userChoice,
        _ read: @escaping @Sendable (CourierClient, Message) async throws -> Void
    ) async throws {
        let configure: (inout CourierServerConfiguration) -> Void = { $0.readReceiptPolicy = policy }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let tablet = try await server.connectedClient("bob", device: "tablet")
            let bobEvents = bob.events()
            let tabletEvents = tablet.events()
            let sent = try await alice.send("secret", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            _ = try await tabletEvents.first { $0.unreadCountUpdate }
            let aliceEvents = alice.events()

            try await read(bob, sent)

            let cleared = try await tabletEvents.first { $0.unreadCountUpdate }
            #expect(cleared.unreadCount == 0)
            try await bob.send("next", to: conversation).stored()
            let sawRead = Atomic(false)
            _ = try await aliceEvents.first { event in
                if event.readUpdate != nil { sawRead.store(true, ordering: .relaxed) }
                return event.receivedMessage
            }
            let peerLearned = sawRead.load(ordering: .relaxed)
            #expect(!peerLearned)
            // Delivered, or not yet (receipts are batched, and may outrun the send's ack), but never read.
            #expect(try await alice.message(sent.id)?.status != .read)
            let shared = try await server.store.conversation(conversation)?.receipts.first { $0.account == "bob" }
            #expect(shared?.read.seq == .zero)
            #expect(try await server.store.unreadCounts(of: "bob").isEmpty)
        }
    }

    @Test("a private read tells no peer")
    func privateRead() async throws {
        try await expectPrivate { bob, message in
            try await bob.markRead(message.id, in: message.conversation, privately: true)
        }
    }

    @Test("an account that turned read receipts off tells no peer")
    func accountSetting() async throws {
        try await expectPrivate { bob, message in
            let settings = try await bob.setSendsReadReceipts(false)
            #expect(!settings.sendReadReceipts && settings.policy == .userChoice)
            try await bob.markConversationRead(message.conversation)
        }
    }

    @Test("read receipts turned off in one conversation are off there only")
    func conversationSetting() async throws {
        try await expectPrivate { bob, message in
            try await bob.setSendsReadReceipts(false, in: message.conversation)
            let settings = try await bob.readReceiptSettings()
            #expect(settings.sendReadReceipts && settings.conversations == [message.conversation: false])
            try await bob.markRead(upTo: message.time, in: message.conversation)
        }
    }

    @Test("the alwaysOff policy shares no read and refuses to change the setting")
    func alwaysOffPolicy() async throws {
        try await expectPrivate(policy: .alwaysOff) { bob, message in
            let refusal = await #expect(throws: CourierError.self) { try await bob.setSendsReadReceipts(true) }
            #expect(refusal?.code == .receiptFixedByPolicy)
            try await bob.markRead(message.id, in: message.conversation)
        }
    }

    @Test("the alwaysOn policy shares every read: private reads and opting out are refused")
    func alwaysOnPolicy() async throws {
        let configure: (inout CourierServerConfiguration) -> Void = { $0.readReceiptPolicy = .alwaysOn }
        try await withTestServer(configure: configure) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let sent = try await alice.send("hi", to: conversation).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            let error = await #expect(throws: CourierError.self) {
                try await bob.markRead(sent.id, in: conversation, privately: true)
            }
            #expect(error?.code == .receiptFixedByPolicy)
            let refusal = await #expect(throws: CourierError.self) { try await bob.setSendsReadReceipts(false) }
            #expect(refusal?.code == .receiptFixedByPolicy)
            #expect(try await bob.readReceiptSettings().policy == .alwaysOn)
            #expect(try await bob.unreadCount(in: conversation) == 1)
        }
    }
}

extension Sequence {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
