// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import Foundation
import Synchronization
import Testing

/// The SDK as a UI consumes it: live queries over the local store, an offline launch, tokens that renew themselves
///. Real SDK clients against a real server; every wait is for a value the stream must emit.
@Suite("Live queries, offline launch and token renewal", .timeLimit(.minutes(5)))
struct LiveQueryTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("a message read out of order turns read in the sender's stream (a read ack above the watermark alone)")
    func readOutOfOrder() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let first = try await alice.send("first", to: direct).stored()
            let second = try await alice.send("second", to: direct).stored()
            _ = try await alice.send("third", to: direct).stored()
            let stream = alice.liveMessages(in: direct)
            _ = try await stream.first { items in items.count == 3 && items.allSatisfy { $0.status == .delivered } ? true : nil }
            try await bob.markRead(second.id, in: direct)
            let statuses = try await stream.first { items in
                items.first { $0.message?.id == second.id }?.status == .read ? items.map(\.status) : nil
            }
            #expect(statuses == [.delivered, .read, .delivered], "only the second was read")
            _ = first
        }
    }

    @Test("one stream shows a message go sending → sent → delivered → read → recalled, in the same row")
    func statusStream() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let chat = alice.liveMessages(in: conversation)
            #expect(try await chat.first { $0.isEmpty ? true : nil })
            func row(_ status: MessageStatus) async throws -> ChatItem {
                try await chat.first { items in items.first { $0.clientID == "hello-1" && $0.status == status } }
            }

            // Written while offline: queued, shown at once.
            await alice.disconnect()
            let send = Task { try await alice.send("hello", to: conversation, clientID: "hello-1").stored() }
            let sending = try await row(.sending)
            #expect(sending.message == nil && sending.body == "hello")
            // Connected: the outbox goes out, the server stores it (bob has no device yet).
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let sent = try await row(.sent)
            #expect(try await send.value.id == sent.message?.id)
            // bob's device stores it, then bob reads it, then alice recalls it.
            let bob = try await server.connectedClient("bob")
            let delivered = try await row(.delivered)
            try await bob.markConversationRead(conversation)
            let read = try await row(.read)
            try await alice.recall(sent: "hello-1", in: conversation)
            let recalled = try await row(.recalled)
            #expect(recalled.body == "" && recalled.message?.id == sent.message?.id)
            #expect(Set([sending.id, sent.id, delivered.id, read.id, recalled.id]).count == 1)
        }
    }

    @Test("a group message's read count rises in the sender's stream as members read")
    func groupReadCount() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let group = ConversationID.group("team")
            let created = try await alice.createGroup("team", members: ["bob", "carol"])
            #expect(created.conversation == group)
            let chat = alice.liveMessages(in: group)
            let readers = [bob, carol].map { ($0, $0.events()) }
            let asked = try await alice.send("lunch?", to: group, needsReadReceipt: true).stored()
            func row(read: Int) async throws -> ChatItem {
                try await chat.first { items in
                    items.first { $0.message?.id == asked.id && $0.message?.readReceiptCount?.readCount == read }
                }
            }
            var statuses: [MessageStatus] = []
            for (index, (reader, events)) in readers.enumerated() {
                _ = try await events.first { $0.receivedMessage?.id == asked.id ? true : nil }
                try await reader.markRead(asked.id, in: group)
                let item = try await row(read: index + 1)
                #expect(item.message?.readReceiptCount?.unreadCount == 1 - index)
                statuses.append(item.status)
            }
            // Read by part of the audience it is still `sent`; by all of it, `read`.
            #expect(statuses == [.sent, .read])
        }
    }

    @Test("the conversation list reorders, previews a recall, and follows reads made on another device")
    func conversationList() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let phone = try await server.connectedClient("alice")
            let tablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let withBob = conversation
            let withCarol = ConversationID.direct("alice", "carol")
            let tabletEvents = tablet.events()
            let list = phone.liveConversations()
            let badge = phone.liveTotalUnreadCount()

            try await bob.send("from bob", to: withBob).stored()
            #expect(try await list.first { $0.map(\.id) == [withBob] ? true : nil })
            let fromCarol = try await carol.send("from carol", to: withCarol).stored()
            let reordered = try await list.first { $0.map(\.id) == [withCarol, withBob] ? $0 : nil }
            #expect(reordered.map(\.unreadCount) == [1, 1] && reordered.first?.lastMessage?.body == "from carol")
            #expect(try await badge.first { $0 == 2 ? true : nil })

            // Read on the tablet: the phone's list and badge follow.
            _ = try await tabletEvents.first { $0.receivedMessage?.id == fromCarol.id ? true : nil }
            try await tablet.markConversationRead(withCarol)
            let afterRead = try await list.first { $0.first?.unreadCount == 0 ? $0 : nil }
            #expect(afterRead.map(\.unreadCount) == [0, 1])
            #expect(try await badge.first { $0 == 1 ? true : nil })

            // carol recalls: the preview turns into a recalled message; bob's chat is still second.
            try await carol.recall(fromCarol.id, in: withCarol)
            let recalled = try await list.first { $0.first?.lastMessage?.status == .recalled ? $0 : nil }
            #expect(recalled.first?.lastMessage?.body == "" && recalled.map(\.id) == [withCarol, withBob])
        }
    }

    @Test("a client launched offline on an existing store reads everything before connecting")
    func offlineLaunch() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("courier-launch-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let bob = try await server.connectedClient("bob")
            // The first run: alice's app syncs into its own store folder, then quits.
            let firstRun = try await server.connectedClient("alice", store: .directory(folder))
            let events = firstRun.events()
            var sent: [Message] = []
            for text in ["one", "two", "three"] { sent.append(try await bob.send(text, to: conversation).stored()) }
            _ = try await events.collect(3) { $0.receivedMessage }
            try await firstRun.markRead(sent[0].id, in: conversation)
            let mine = try await firstRun.send("mine", to: conversation).stored()
            _ = try await events.first { $0.deliveryUpdate?.messageIDs.contains(mine.id) == true ? true : nil }
            await firstRun.disconnect()

            // The next launch, with no network: a client for the signed-in account, never connected.
            let launch = try CourierClient(
                account: "alice",
                configuration: .init(serverURL: URL(string: "ws://127.0.0.1:9/v1/ws")!, store: .directory(folder))
            )
            #expect(launch.connectionState == .disconnected(nil))
            let messages = try await launch.messages(in: conversation)
            #expect(messages.map(\.body) == ["one", "two", "three", "mine"])
            #expect(messages.map(\.status) == [.read, .delivered, .delivered, .delivered])
            #expect(try await launch.message(mine.id)?.isOwn == true)
            #expect(try await launch.unreadCount(in: conversation) == 2)
            #expect(try await launch.totalUnreadCount() == 2)
            let conversations = try await launch.conversations()
            #expect(conversations.map(\.id) == [conversation] && conversations.first?.lastMessage?.id == mine.id)
            let live = try await launch.liveMessages(in: conversation).first { $0.count == 4 ? $0 : nil }
            #expect(live.map(\.body) == ["one", "two", "three", "mine"])
            // Another account's launch gets its own, empty store in the same folder.
            let other = try CourierClient(
                account: "bob",
                configuration: .init(serverURL: URL(string: "ws://127.0.0.1:9/v1/ws")!, store: .directory(folder))
            )
            #expect(try await other.conversations().isEmpty)
        }
    }

    @Test("an expired token is renewed through the provider, and what was queued meanwhile goes out once")
    func tokenRenewal() async throws {
        try await withTestServer(configure: { $0.tokens = .init(leeway: .zero) }) { server in
            try await server.register("alice", "bob")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let calls = Atomic(0)
            let alice = try server.client()
            let states = alice.events()
            // The first token lives two seconds; the provider's later ones an hour.
            try await alice.connect(account: "alice") { account in
                let call = calls.add(1, ordering: .relaxed).newValue
                return try await server.token(for: account, lifetime: .seconds(call == 1 ? 2 : 3600))
            }
            let before = try await alice.send("before", to: conversation).stored()

            // The server ends the session at expiry; a message written while the client reconnects is queued.
            _ = try await states.first(timeout: .seconds(15)) { $0.connectionState == .waitingToReconnect ? true : nil }
            let during = Task { try await alice.send("during", to: conversation, clientID: "during-1").stored() }
            _ = try await states.first { $0.connectionState == .connected ? true : nil }
            let delivered = try await during.value
            #expect(calls.load(ordering: .relaxed) == 2)
            #expect(alice.connectionState == .connected)

            let received = try await bobEvents.collect(2) { $0.receivedMessage }
            #expect(received.map(\.id) == [before.id, delivered.id])
            let stored = try await server.store.messages(in: conversation, after: .zero, limit: 10)
            #expect(stored.filter { $0.clientID == "during-1" }.count == 1)
            #expect(try await alice.pendingMessages().isEmpty)
        }
    }

    @Test("a provider whose tokens the server keeps refusing stops the client, unauthorized")
    func refusedProvider() async throws {
        try await withTestServer { server in
            try await server.register("alice", "mallory")
            let calls = Atomic(0)
            let alice = try server.client()
            await #expect(throws: CourierError.self) {
                try await alice.connect(account: "alice") { _ in
                    calls.add(1, ordering: .relaxed)
                    return try await server.token(for: "mallory")  // another account's token: always refused
                }
            }
            #expect(calls.load(ordering: .relaxed) == 3)
            guard case .disconnected(.unauthorized?) = alice.connectionState else {
                Issue.record("expected disconnected(unauthorized), got \(alice.connectionState)")
                return
            }
        }
    }
}
