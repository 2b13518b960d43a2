// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Observation
import Synchronization
import Testing

/// The SDK's chat and conversation-list models with real clients against a real server: anchored paging
/// from the local store and then the server, local echo, retry and discard of a refused send, reads of visible rows,
/// the recall deadline and the caller's role.
// 5 minutes: paging 500 messages takes 5 s alone but went past 120 s once in a full run on two cores.
@Suite("Chat model", .timeLimit(.minutes(5)))
@MainActor
struct ChatModelTests {
    struct TimedOut: Error, CustomStringConvertible { let description: String }

    /// Re-checks `condition` whenever `observed` (what it reads of a model) changes, until it holds or 10 s pass.
    func until(
        _ what: String,
        observing observed: @escaping @MainActor () -> Void,
        _ condition: @escaping @MainActor () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(description: "timed out waiting until \(what)") }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumed = Atomic(false)
                let resume: @Sendable () -> Void = {
                    if !resumed.exchange(true, ordering: .relaxed) { continuation.resume() }
                }
                withObservationTracking(observed, onChange: resume)
                // The deadline wakes the loop too (it then throws).
                Task {
                    try? await Task.sleep(until: deadline)
                    resume()
                }
            }
        }
    }

    @Test("models started before the client knows its account show the account's chats once it connects")
    func modelsStartedBeforeTheAccount() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.send("while bob's app was starting", to: direct).stored()
            // A fresh install at launch: no account yet, the screens' models start at once.
            let bob = try server.client()
            let chat = ChatModel(client: bob, conversation: direct)
            let list = ConversationListModel(client: bob)
            chat.start()
            list.start()
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            try await until("the chat shows the message", observing: { _ = chat.items }) {
                chat.items.last?.message?.id == sent.id
            }
            try await until("the list shows the conversation", observing: { _ = list.conversations }) {
                list.conversations.map(\.id) == [direct]
            }
            #expect(chat.error == nil && list.error == nil)
        }
    }

    @Test("the chat model shows who is typing, and stops when they send; its own setTyping tells the other member")
    func typingOnTheModel() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let model = ChatModel(client: bob, conversation: direct)
            model.start()
            let other = ChatModel(client: alice, conversation: direct)
            other.start()
            await other.setTyping(true)
            try await until("bob's screen shows alice typing", observing: { _ = model.typing }) { model.typing == ["alice"] }
            // Her message ends it, with no request of hers.
            _ = try await alice.send("done typing", to: direct).stored()
            try await until("alice's message ends it", observing: { _ = model.typing }) { model.typing.isEmpty }
            #expect(other.typing.isEmpty, "nobody is shown their own typing")
        }
    }

    @Test("a row's recall, delete for me and the draft, from the chat model")
    func rowActions() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let first = try await alice.send("oops", to: direct).stored()
            let second = try await alice.send("just for me to forget", to: direct).stored()
            _ = try await bobEvents.collect(2) { $0.receivedMessage }
            let model = ChatModel(client: alice, conversation: direct)
            model.start()
            try await until("both rows show", observing: { _ = model.items }) { model.items.count == 2 }
            await model.recall(model.items[0])
            try await until("the first row is recalled in place", observing: { _ = model.items }) {
                model.items.first { $0.message?.id == first.id }?.kind == .recalled
            }
            #expect(try await bobEvents.first { $0.recallNotice }.messageID == first.id)
            await model.deleteForMe(model.items[1])
            try await until("the second row is gone here", observing: { _ = model.items }) {
                !model.items.contains { $0.message?.id == second.id }
            }
            #expect(try await bob.message(second.id)?.body == "just for me to forget", "the other member keeps it")
            await model.setDraft("half a thought")
            #expect(try await alice.conversations().first { $0.id == direct }?.draft == "half a thought")
            #expect(model.error == nil)
        }
    }

    @Test("a row's edit and reactions, from the chat model: the row shows them in place, the other member's too")
    func editAndReactions() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            _ = try await alice.send("see you at 6", to: direct).stored()
            _ = try await bobEvents.first { $0.receivedMessage }
            let mine = ChatModel(client: alice, conversation: direct)
            let theirs = ChatModel(client: bob, conversation: direct)
            mine.start()
            theirs.start()
            try await until("the row shows", observing: { _ = theirs.items }) { theirs.items.count == 1 }
            try await until("the row shows", observing: { _ = mine.items }) { mine.items.count == 1 }

            await mine.edit(mine.items[0], text: "see you at 7")
            try await until("the other member's row is edited in place", observing: { _ = theirs.items }) {
                theirs.items.first?.body == "see you at 7" && theirs.items.first?.editedAt != nil
            }
            #expect(mine.editDeadline(for: mine.items[0]) != nil)
            #expect(theirs.editDeadline(for: theirs.items[0]) == nil, "not bob's message")

            await theirs.toggleReaction("👍", on: theirs.items[0])
            try await until("the sender's row shows the reaction", observing: { _ = mine.items }) {
                mine.items.first?.reactions == [ReactionCount(reaction: "👍", count: 1)]
            }
            try await until("bob's row shows it as his", observing: { _ = theirs.items }) {
                theirs.items.first?.myReactions == ["👍"]
            }
            await theirs.toggleReaction("👍", on: theirs.items[0])
            try await until("taken back", observing: { _ = mine.items }) { mine.items.first?.reactions.isEmpty == true }
            #expect(mine.error == nil && theirs.error == nil)
        }
    }

    @Test("after a clear, paging stops at what was cleared: no page through hidden history, locally or from the server")
    func pagingStopsAtClear() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            for index in 1...6 { _ = try await alice.send("m\(index)", to: direct).stored() }
            let bob = try await server.connectedClient("bob")
            _ = try await bob.liveMessages(in: direct).first { $0.count == 6 ? true : nil }
            try await bob.clear(direct)
            for index in 7...9 { _ = try await alice.send("m\(index)", to: direct).stored() }
            _ = try await bob.liveMessages(in: direct).first { $0.count == 3 ? true : nil }

            let model = ChatModel(client: bob, conversation: direct, pageSize: 2)
            model.start()
            try await until("the first page shows", observing: { _ = model.items }) { model.items.count == 2 }
            #expect(model.hasOlder)
            #expect(try await model.loadOlder() == 1)
            #expect(model.items.map(\.body) == ["m7", "m8", "m9"])
            #expect(!model.hasOlder, "m6 and before were cleared")
            #expect(try await model.loadOlder() == 0)
        }
    }

    @Test("pages 500 messages back, 50 at a time, from a new install's 20 up to the first; rows shown stay as they are")
    func pagesBack() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            // The last send waits behind the 500 queued ones, and the pages come after: under ThreadSanitizer on a
            // loaded machine that took longer than the harness's 20 s (this test is about paging, not speed).
            let alice = try await server.connectedClient("alice") { $0.requestTimeout = .seconds(120) }
            for index in 1...500 { _ = try await alice.send(.text("m\(index)"), to: direct).clientID }
            _ = try await alice.send("m501", to: direct).stored()
            // Bob read them all elsewhere: a new install then syncs the newest 20 only (the rest is history).
            #expect(try await server.rest("POST", "/v1/conversations/\(direct)/reads", body: #"{"accounts":["bob"],"seq":501}"#).status == 204)
            let bob = try await server.connectedClient("bob") {
                $0.initialSyncLimit = 20
                $0.requestTimeout = .seconds(120)
            }
            #expect(try await bob.messages(in: direct, limit: 1000).count == 20)

            let model = ChatModel(client: bob, conversation: direct, pageSize: 50)
            model.start()
            try await until("the first page shows", observing: { _ = model.items }) { model.items.count == 20 }
            #expect(model.hasOlder)
            var pages = 0
            while model.hasOlder {
                let shown = model.items
                let added = try await model.loadOlder()
                pages += 1
                #expect(Array(model.items.suffix(shown.count)) == shown, "the rows shown before stay as they were")
                #expect(model.items.count == shown.count + added)
                #expect(added == 50 || !model.hasOlder)
            }
            #expect(pages == 10)  // 481 older messages: 9 pages of 50, then 31
            let seqs = model.items.compactMap { $0.message?.seq.rawValue }
            #expect(seqs == Array(1...501))
            #expect(Set(model.items.map(\.id)).count == 501)
            #expect(model.items.last?.body == "m501" && model.items.first?.body == "m1")
            #expect(try await model.loadOlder() == 0)

            // A new message arrives below what was paged: the window keeps everything and adds it.
            _ = try await alice.send("m502", to: direct).stored()
            try await until("the new message shows", observing: { _ = model.items }) { model.items.count == 502 }
            #expect(model.items.first?.body == "m1")
        }
    }

    @Test("offline, pages back through what the device holds, recall notices and tombstones included")
    func pagesOffline() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            var sent: [Message] = []
            for index in 1...30 { sent.append(try await alice.send("m\(index)", to: direct).stored()) }
            // Recalls put notices (entries no list shows) among the seqs the device holds.
            for message in sent[5..<15] { _ = try await alice.recall(message.id, in: direct) }
            let last = try await alice.send("last", to: direct).stored()
            await alice.disconnect()

            let model = ChatModel(client: alice, conversation: direct, pageSize: 10)
            model.start()
            try await until("the first page shows", observing: { _ = model.items }) { model.items.last?.message?.id == last.id }
            while model.hasOlder { try await model.loadOlder() }
            #expect(model.error == nil, "\(String(describing: model.error))")
            let shown = model.items.compactMap(\.message)
            #expect(shown.first?.body == "m1" && shown.last?.id == last.id)
            #expect(shown.filter { $0.status == .recalled }.count == 10)
            #expect(shown.count == 31 && Set(shown.map(\.id)).count == 31)
        }
    }

    @Test("local echo: a send shows at once and becomes sent in place; a refused one is retried or discarded, never resent")
    func echoRetryDiscard() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let model = ChatModel(client: alice, conversation: direct)
            model.start()
            await model.send("hello")
            try await until("the row shows", observing: { _ = model.items }) { !model.items.isEmpty }
            let id = try #require(model.items.last?.id)
            #expect(model.items.last?.isOwn == true)
            try await until("it is sent", observing: { _ = model.items }) { model.items.last?.status == .sent || model.items.last?.status == .delivered }
            #expect(model.items.count == 1 && model.items.last?.id == id, "the same row, in place")
            #expect(model.items.last?.sender == "alice" && model.items.last?.content == .text("hello"))

            // A group Alice is not in: the server refuses, the row fails. Once she is added, the retry goes out, once.
            _ = try await server.rest("POST", "/v1/groups", body: #"{"group":"others","owner":"bob","members":["carol"]}"#)
            let group = ConversationID.group("others")
            let retried = ChatModel(client: alice, conversation: group)
            retried.start()
            await retried.send("let me in")
            try await until("the send fails", observing: { _ = retried.items }) { retried.items.last?.status == .failed }
            let failed = try #require(retried.items.last)
            _ = try await server.rest("POST", "/v1/groups/others/changes", body: #"{"by":"bob","action":"add","accounts":["alice"]}"#)
            await retried.retry(failed)
            try await until("the retry is stored", observing: { _ = retried.items }) { retried.items.last?.message != nil }
            #expect(retried.items.last?.id == failed.id && retried.items.filter { $0.body == "let me in" }.count == 1)

            // A group she is not in stays refused: the failed row is discarded, and goes.
            _ = try await server.rest("POST", "/v1/groups", body: #"{"group":"closed","owner":"bob","members":["carol"]}"#)
            let refused = ChatModel(client: alice, conversation: .group("closed"))
            refused.start()
            await refused.send("let me in too")
            try await until("the send fails", observing: { _ = refused.items }) { refused.items.last?.status == .failed }
            await refused.discard(try #require(refused.items.last))
            try await until("the row is gone", observing: { _ = refused.items }) { refused.items.isEmpty }
            await alice.disconnect()
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            #expect(try await alice.pendingMessages().isEmpty, "a discarded message is not sent again")
        }
    }

    @Test("rows that appear together are one read, up to the newest of them")
    func rowsAppearingTogetherAreOneRead() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let aliceEvents = alice.events()
            let direct = ConversationID.direct("alice", "bob")
            for body in ["one", "two", "three"] { _ = try await alice.send(body, to: direct).stored() }
            let model = ChatModel(client: bob, conversation: direct)
            model.start()
            try await until("all show", observing: { _ = model.items }) { model.items.count == 3 }

            // When the three rows appear in one pass, each from its own `onAppear` task (as SwiftUI calls them).
            let rows = model.items
            let appearances = rows.map { row in Task { await model.markVisibleRead(row) } }
            for appearance in appearances { await appearance.value }
            // And, later, a fourth row.
            let fourth = try await alice.send("four", to: direct).stored()
            try await until("the fourth shows", observing: { _ = model.items }) { model.items.count == 4 }
            await model.markVisibleRead(model.items[3])

            // Then alice learns of two reads: up to the third message (one read for the three rows), then the fourth.
            var reads: [Seq] = []
            for await event in aliceEvents {
                if case .messageRead(let update) = event { reads.append(update.watermark.seq) }
                if reads.count == 2 { break }
            }
            #expect(reads == [rows[2].message?.seq, fourth.seq].compactMap { $0 })
            #expect(model.error == nil)
        }
    }

    @Test("a recall notice that counts as unread is read with the row before it: the badge clears")
    func recallNoticeCountedAsUnreadIsRead() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let direct = ConversationID.direct("alice", "bob")
            _ = try await alice.send("one", to: direct).stored()
            let two = try await alice.send("two", to: direct).stored()
            // The notice counts as unread (NIM's shouldBeCounted) and has no row: the tombstone of "two" is the last row.
            _ = try await alice.recall(two.id, in: direct, countsAsUnread: true)
            let model = ChatModel(client: bob, conversation: direct)
            model.start()
            try await until("the tombstone shows", observing: { _ = model.items }) {
                model.items.count == 2 && model.items.last?.kind == .recalled
            }
            _ = try await bob.liveTotalUnreadCount().first { $0 == 2 ? true : nil }

            for row in model.items { await model.markVisibleRead(row) }
            #expect(model.error == nil)
            // Every row seen, the notice after the last one with it: nothing is left unread, here or on the server.
            #expect(try await bob.unreadCount(in: direct) == 0)
            let (_, body) = try await server.restResponse("GET", "/v1/accounts/bob/unread")
            #expect(try JSONDecoder().decode(UnreadAck.self, from: body).total == 0)
        }
    }

    @Test("a visible row is read up to it once; the recall deadline follows the window and the caller's role")
    func readsAndRecallDeadline() async throws {
        try await withTestServer(configure: { $0.recallWindow = .seconds(60); $0.adminRecallWindow = .seconds(3600) }) { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let aliceEvents = alice.events()
            let direct = ConversationID.direct("alice", "bob")
            let first = try await alice.send("one", to: direct).stored()
            let second = try await alice.send("two", to: direct).stored()
            let model = ChatModel(client: bob, conversation: direct)
            model.start()
            try await until("both show", observing: { _ = model.items }) { model.items.count == 2 }
            await model.markVisibleRead(model.items[1])
            await model.markVisibleRead(model.items[0])  // already covered: nothing sent
            let read = try await aliceEvents.first { event -> Seq? in
                if case .messageRead(let update) = event { return update.watermark.seq }
                return nil
            }
            #expect(read == second.seq)
            #expect(model.error == nil)

            // Direct: one's own message until its time plus the window; someone else's never.
            let own = try #require(try await alice.message(first.id))
            // On the device's clock, which here is the server's but for the round trip's share.
            let ownDeadline = try #require(try await alice.recallDeadline(for: own))
            #expect(abs(ownDeadline.timeIntervalSince1970 - Double(own.time.rawValue + 60_000) / 1000) < 1)
            #expect(model.recallDeadline(for: model.items[0]) == nil)

            // A group: the owner may recall a member's message for the manager window; a member may not.
            let team = ConversationID.group("team")
            _ = try await alice.createGroup("team", members: ["bob", "carol"])
            let carol = try await server.connectedClient("carol")
            let carolsEvents = carol.events()
            let alicesNews = alice.events()
            let news = try await bob.send("news", to: team).stored()
            // Each device has it in its store once its event came: the two come in either order.
            _ = try await carolsEvents.first { $0.receivedMessage?.id == news.id ? true : nil }
            _ = try await alicesNews.first { $0.receivedMessage?.id == news.id ? true : nil }
            let seenByAlice = try #require(try await alice.message(news.id))
            #expect(try await alice.role(in: team) == .owner)
            let managerDeadline = try #require(try await alice.recallDeadline(for: seenByAlice))
            #expect(abs(managerDeadline.timeIntervalSince1970 - Double(news.time.rawValue + 3_600_000) / 1000) < 1)
            let seenByCarol = try #require(try await carol.message(news.id))
            #expect(try await carol.role(in: team) == .member)
            #expect(try await carol.recallDeadline(for: seenByCarol) == nil)
            // Carol's screen answers synchronously, from the role its window last read.
            let carolsChat = ChatModel(client: carol, conversation: team)
            carolsChat.start()
            try await until("carol's chat shows the news", observing: { _ = carolsChat.items }) {
                carolsChat.items.contains { $0.message?.id == news.id }
            }
            let newsRow = try #require(carolsChat.items.first { $0.message?.id == news.id })
            #expect(carolsChat.recallDeadline(for: newsRow) == nil)
            // Made an admin, Carol may.
            _ = try await alice.setRole(.admin, for: ["carol"], in: team)
            _ = try await carolsEvents.first { $0.receivedMessage?.groupChange?.action == .roleChanged ? true : nil }
            #expect(try await carol.role(in: team) == .admin)
            #expect(try await carol.recallDeadline(for: seenByCarol) != nil)
            try await until("carol's chat knows she is an admin", observing: { _ = carolsChat.items }) {
                carolsChat.recallDeadline(for: newsRow) != nil
            }
            // Removed, she may no longer.
            _ = try await alice.removeMembers(["carol"], from: team)
            _ = try await carolsEvents.first { $0.receivedMessage?.groupChange?.action == .removed ? true : nil }
            #expect(try await carol.role(in: team) == nil)
            #expect(try await carol.recallDeadline(for: seenByCarol) == nil)
        }
    }

    @Test("the conversation list model follows new conversations and the total unread count")
    func conversationList() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let bob = try await server.connectedClient("bob")
            let list = ConversationListModel(client: bob)
            list.start()
            _ = try await server.rest("POST", "/v1/conversations/d:alice:bob/messages", body: #"{"from":"alice","clientId":"a","body":"hi"}"#)
            _ = try await server.rest("POST", "/v1/conversations/d:bob:carol/messages", body: #"{"from":"carol","clientId":"c","body":"yo"}"#)
            try await until("both conversations show with their unread", observing: { _ = list.conversations; _ = list.totalUnreadCount }) {
                list.conversations.count == 2 && list.totalUnreadCount == 2
            }
            #expect(Set(list.conversations.map(\.id)) == ["d:alice:bob", "d:bob:carol"])
        }
    }

    /// An uploader on a network that stalls: it reports a quarter once the test lets it, then waits until its task
    /// is cancelled, and says so.
    final class StalledUploader: AttachmentUploader {
        let go = AsyncStream.makeStream(of: Void.self)
        let stopped = AsyncStream.makeStream(of: Void.self)
        func upload(_ attachment: CourierSDK.Attachment, progress: @escaping @Sendable (Double) -> Void) async throws -> URL {
            for await _ in go.stream { break }
            progress(0.25)
            let (forever, _) = AsyncStream.makeStream(of: Void.self)
            for await _ in forever {}  // ends only when the upload's task is cancelled
            stopped.continuation.yield()
            throw CancellationError()
        }
    }

    @Test("an attachment's row shows its upload's progress, and cancelling the row stops the upload: nothing is sent")
    func uploadProgressAndCancel() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let uploader = StalledUploader()
            let alice = try await server.connectedClient("alice") { $0.attachmentUploader = uploader }
            let chat = ChatModel(client: alice, conversation: direct)
            chat.start()
            let photo = CourierSDK.Attachment(url: URL(filePath: "/tmp/stalled.jpg"), mimeType: "image/jpeg")
            guard let sending = await chat.send(.image(photo)) else {
                Issue.record("not queued: \(String(describing: chat.error))")
                return
            }
            let progress = sending.uploadProgress
            uploader.go.continuation.yield()
            var fractions = progress.makeAsyncIterator()
            #expect(await fractions.next() == 0.25)
            try await until("the row shows a quarter uploaded", observing: { _ = (chat.uploadProgress, chat.items) }) {
                chat.uploadProgress[sending.clientID] == 0.25 && chat.items.last?.clientID == sending.clientID
            }
            guard let row = chat.items.last else { return }
            #expect(await chat.cancel(row))
            var stopped = uploader.stopped.stream.makeAsyncIterator()
            _ = await stopped.next()  // the upload's task was cancelled
            try await until("the row is gone", observing: { _ = chat.items }) { chat.items.isEmpty }
            #expect(chat.uploadProgress.isEmpty)
            #expect(await fractions.next() == nil)  // the progress ends with the send
            await #expect(throws: CourierError.cancelled) { try await sending.stored() }
            // The next message goes out alone.
            let next = try await alice.send("sent instead", to: direct).stored()
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).map(\.id) == [next.id])
        }
    }

    @Test("a device whose clock is off by ten minutes still hides Recall when the server starts refusing it")
    func recallDeadlineOnTheDevicesClock() async throws {
        // The server's clock runs ten minutes ahead of this device's.
        try await withTestServer(configure: { configuration in
            configuration.recallWindow = .seconds(60)
            configuration.now = { Timestamp(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 600_000) }
        }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.send("typo", to: direct).stored()
            let chat = ChatModel(client: alice, conversation: direct)
            chat.start()
            try await until("the row shows", observing: { _ = chat.items }) { chat.items.first?.message?.id == sent.id }
            let deadline = try #require(chat.recallDeadline(for: chat.items[0]))
            // A minute from now on this device's clock, not eleven (the server's time plus the window, unadjusted).
            let fromNow = deadline.timeIntervalSinceNow
            #expect(fromNow > 50 && fromNow <= 61, "\(fromNow) s from now")
        }
    }

    @Test("opens at a message and at the first unread, pages newer until it follows the newest; counts what arrives below while scrolled up")
    func anchoredWindow() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            var sent: [CourierSDK.Message] = []
            for index in 1...30 { sent.append(try await alice.send("m\(index)", to: direct).stored()) }
            // Bob read up to m10 on another screen.
            let newest = sent[29].id
            _ = try await bob.liveMessages(in: direct).first { items in items.last?.message?.id == newest ? true : nil }
            try await bob.markRead(upTo: sent[9].id, in: direct)

            // At a message: half a page (5) before it, the rest from it on; newer ones to page.
            let atMessage = ChatModel(client: bob, conversation: direct, pageSize: 10, openAt: .message(sent[14].id))
            atMessage.start()
            try await until("opened at m15", observing: { _ = (atMessage.items, atMessage.anchorItemID) }) {
                atMessage.anchorItemID != nil
            }
            #expect(atMessage.items.map(\.body) == (10...19).map { "m\($0)" })
            #expect(atMessage.anchorItemID == atMessage.items.first { $0.message?.id == sent[14].id }?.id)
            #expect(atMessage.hasNewer && atMessage.hasOlder)
            #expect(try await atMessage.loadNewer() == 10)
            try await until("m20…m29 follow", observing: { _ = atMessage.items }) { atMessage.items.count == 20 }
            #expect(atMessage.hasNewer)
            #expect(try await atMessage.loadNewer() == 1)
            #expect(!atMessage.hasNewer)
            try await until("m30 shows", observing: { _ = atMessage.items }) { atMessage.items.last?.body == "m30" }

            // Following the newest now: a message that arrives shows; scrolled up, it is counted below.
            atMessage.isAtBottom = false
            let late = try await alice.send("late", to: direct).stored()
            try await until("late shows and is counted", observing: { _ = (atMessage.items, atMessage.newBelow) }) {
                atMessage.items.last?.message?.id == late.id && atMessage.newBelow == 1
            }
            atMessage.isAtBottom = true
            #expect(atMessage.newBelow == 0)

            // At the first unread: m11, bob having read up to m10.
            let unread = ChatModel(client: bob, conversation: direct, pageSize: 10, openAt: .firstUnread)
            unread.start()
            try await until("opened at the first unread", observing: { _ = unread.anchorItemID }) { unread.anchorItemID != nil }
            #expect(unread.items.first { $0.id == unread.anchorItemID }?.message?.id == sent[10].id)
            #expect(unread.items.first?.body == "m6" && unread.hasNewer)
            // Jump to the newest.
            unread.open(at: .newest)
            try await until("at the newest", observing: { _ = unread.items }) { unread.items.last?.message?.id == late.id }
            #expect(!unread.hasNewer)

            // A message this device does not hold cannot be opened at.
            let nowhere = ChatModel(client: bob, conversation: direct, openAt: .message(MessageID(rawValue: "m_nowhere")))
            nowhere.start()
            try await until("the error shows", observing: { _ = nowhere.error }) { nowhere.error != nil }
            #expect(nowhere.error?.code == .messageNotFound)
        }
    }
}
