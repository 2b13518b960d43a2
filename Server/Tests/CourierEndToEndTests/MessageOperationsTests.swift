// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Everyday message operations (ADR 0029), with real SDK clients against a real server on both backends:
/// delete for me, clear, mute and pin reach the account's other device and a new install; `ext` travels with a
/// message; an attachment is uploaded through the outbox before its message goes out, once.
@Suite("Message operations", .timeLimit(.minutes(5)))
struct MessageOperationsTests {
    @Test(
        "delete for me and clear reach the account's other device and a new install; the peer keeps everything",
        arguments: ServerBackend.available
    )
    func deleteAndClear(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bobPhone = try await server.connectedClient("bob", device: "phone")
            let bobTablet = try await server.connectedClient("bob", device: "tablet")
            var sent: [Message] = []
            for text in ["one", "two", "three", "four"] { sent.append(try await alice.send(text, to: direct).stored()) }
            let tabletView = bobTablet.liveMessages(in: direct)
            _ = try await tabletView.first { $0.count == 4 ? true : nil }
            #expect(try await bobTablet.unreadCount(in: direct) == 4)

            try await bobPhone.deleteForMe([sent[2].id], in: direct)
            #expect(try await bobPhone.messages(in: direct).map(\.body) == ["one", "two", "four"])
            // The other device learns it live: the row goes, and it no longer counts as unread.
            let shown = try await tabletView.first { items in items.count == 3 ? items.map(\.body) : nil }
            #expect(shown == ["one", "two", "four"])
            #expect(try await bobTablet.unreadCount(in: direct) == 3)

            try await bobTablet.clear(direct)
            _ = try await bobPhone.liveMessages(in: direct).first { $0.isEmpty ? true : nil }
            #expect(try await bobPhone.unreadCount(in: direct) == 0)
            // What comes after a clear shows as usual.
            let five = try await alice.send("five", to: direct).stored()
            _ = try await bobPhone.liveMessages(in: direct).first { $0.map(\.message?.id) == [five.id] ? true : nil }

            // A new install syncs the same view; the peer still has all five.
            let laptop = try await server.connectedClient("bob", device: "laptop")
            let synced = try await laptop.liveMessages(in: direct).first { items in
                items.contains { $0.message?.id == five.id } ? items.map(\.body) : nil
            }
            #expect(synced == ["five"])
            #expect(try await laptop.unreadCount(in: direct) == 1)
            #expect(try await alice.messages(in: direct).map(\.body) == ["one", "two", "three", "four", "five"])

            // Someone else's message, or one of another conversation: refused, nothing changed.
            _ = try await alice.createGroup("g", members: ["bob"])
            let elsewhere = try await alice.send("elsewhere", to: .group("g")).stored()
            await #expect(throws: CourierError.self) { try await bobPhone.deleteForMe([elsewhere.id], in: direct) }
        }
    }

    @Test(
        "the server's unread counts leave out what the account cleared or deleted: the unread request, a read's answer, REST",
        arguments: ServerBackend.available
    )
    func serverUnreadCounts(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            var messages: [Message] = []
            for text in ["one", "two", "three", "four"] { messages.append(try await alice.send(text, to: direct).stored()) }
            let sent = messages
            try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                func unread() async throws -> Int? {
                    guard case .ack(_, .unread(let ack)) = try await bob.request(.unread("u")) else { throw Unexpected() }
                    return ack.conversations[direct]
                }
                #expect(try await unread() == 4)
                let delete = ChangeViewRequest(conversation: direct, deleteMessageIds: [sent[3].id])
                guard case .ack(_, .changeView(let changed)) = try await bob.request(.changeView("v1", delete)) else {
                    throw Unexpected()
                }
                #expect(changed.view == ConversationView(deletedSeqs: [sent[3].seq]))
                #expect(try await unread() == 3)
                // A read's answer counts the same way (on PostgreSQL, a statement of its own).
                let read = ReadRequest(conversation: direct, seq: sent[0].seq)
                guard case .ack(_, .read(let state)) = try await bob.request(.read("r1", read)) else { throw Unexpected() }
                #expect(state.unreadCount == 2, "two and three; four was deleted")
                let (_, rest) = try await server.restResponse("GET", "/v1/accounts/bob/unread")
                struct Counts: Decodable { let total: Int }
                #expect(try JSONDecoder().decode(Counts.self, from: rest).total == 2)

                let clear = ChangeViewRequest(conversation: direct, clear: true)
                guard case .ack(_, .changeView(let cleared)) = try await bob.request(.changeView("v2", clear)) else {
                    throw Unexpected()
                }
                #expect(cleared.view == ConversationView(cleared: sent[3].seq), "a clear takes in what was deleted")
                #expect(try await unread() == nil)
                // Nothing to change, or a message of nobody: stable errors, nothing written.
                let nothing = ChangeViewRequest(conversation: direct)
                guard case .error(_, let error) = try await bob.request(.changeView("v3", nothing)) else { throw Unexpected() }
                #expect(error.code == .invalidArgument)
                let unknown = ChangeViewRequest(conversation: direct, deleteMessageIds: ["no-such-message"])
                guard case .error(_, let missing) = try await bob.request(.changeView("v4", unknown)) else { throw Unexpected() }
                #expect(missing.code == .messageNotFound)
            }
            // The peer sees none of it: its state lists no receipts of Bob's, who only changed his view.
            let peer = try await server.store.conversations(of: "alice").first { $0.id == direct }
            #expect(peer?.view == nil && peer?.receipts.contains { $0.account == "bob" && $0.read.seq == .zero } == false)
        }
    }

    @Test("a tip shows after the message that was newest, stays on its device, and goes with a clear")
    func localTips() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let phone = try await server.connectedClient("bob", device: "phone")
            let tablet = try await server.connectedClient("bob", device: "tablet")
            let first = try await alice.send("first", to: direct).stored()
            _ = try await phone.liveMessages(in: direct).first { $0.contains { $0.message?.id == first.id } ? true : nil }
            let tip = try await phone.insertTip("Messages here are kept for a year", in: direct)
            #expect(tip.afterSeq == first.seq)
            let second = try await alice.send("second", to: direct).stored()
            let rows = try await phone.liveMessages(in: direct).first { items in
                items.contains { $0.message?.id == second.id } ? items : nil
            }
            #expect(rows.map(\.body) == ["first", "Messages here are kept for a year", "second"])
            #expect(rows[1].kind == .tip && !rows[1].isOwn && rows[1].sender == nil)
            // Never sent: the other device and the server have the two messages only.
            let other = try await tablet.liveMessages(in: direct).first { items in
                items.contains { $0.message?.id == second.id } ? items : nil
            }
            #expect(other.map(\.body) == ["first", "second"])
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).count == 2)
            // A clear hides it with what it follows; a tip removed is gone.
            let later = try await phone.insertTip("later", in: direct)
            try await phone.clear(direct)
            _ = try await phone.liveMessages(in: direct).first { $0.isEmpty ? true : nil }
            #expect(try await phone.removeTip(later.id))
            #expect(try await !phone.removeTip(later.id))
        }
    }

    @Test("search leaves out what you deleted or cleared, and still fills its page with what is shown")
    func searchHidesDeleted() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            var messages: [Message] = []
            for index in 1...4 { messages.append(try await alice.send("note \(index)", to: direct).stored()) }
            try await alice.deleteForMe([messages[3].id], in: direct)
            #expect(try await alice.searchMessages("note", limit: 1).map(\.body) == ["note 3"])
            try await alice.clear(direct)
            #expect(try await alice.searchMessages("note").isEmpty)
        }
    }

    @Test("a view ends with the membership: a member removed and added again starts with none", arguments: ServerBackend.available)
    func viewEndsWithMembership(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let team = ConversationID.group("team")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            _ = try await alice.createGroup("team", members: ["bob"])
            let hello = try await alice.send("hello", to: team).stored()
            _ = try await bob.liveMessages(in: team).first { $0.contains { $0.message?.id == hello.id } ? true : nil }
            try await bob.deleteForMe([hello.id], in: team)
            try await bob.setMuted(true, in: team)
            #expect(try await server.store.view(of: "bob", in: team) == ConversationView(deletedSeqs: [hello.seq], muted: true))

            _ = try await alice.removeMembers(["bob"], from: team)
            #expect(try await server.store.view(of: "bob", in: team) == .none)
            _ = try await alice.addMembers(["bob"], to: team)
            // A new membership's first change of its view: what the ack carries is that change alone.
            try await bob.setPinned(true, in: team)
            let view = try await server.store.view(of: "bob", in: team)
            #expect(view.deletedSeqs.isEmpty && !view.muted && view.pinnedAt != nil, "nothing of the last membership's view: \(view)")
        }
    }

    @Test("mute and pin reach the account's other device; pinned conversations come first", arguments: ServerBackend.available)
    func muteAndPin(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let withBob = ConversationID.direct("alice", "bob")
            let withCarol = ConversationID.direct("alice", "carol")
            let alicePhone = try await server.connectedClient("alice", device: "phone")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            _ = try await alicePhone.send("to bob", to: withBob).stored()
            _ = try await alicePhone.send("to carol", to: withCarol).stored()
            _ = try await aliceTablet.liveConversations().first { $0.count == 2 && $0.first?.id == withCarol ? true : nil }

            try await alicePhone.setPinned(true, in: withBob)
            try await alicePhone.setMuted(true, in: withCarol)
            let listed = try await aliceTablet.liveConversations().first { list in
                list.first?.isPinned == true && list.last?.isMuted == true ? list : nil
            }
            #expect(listed.map(\.id) == [withBob, withCarol], "pinned first, though older")
            #expect(listed.first?.isMuted == false && listed.last?.isPinned == false)

            try await aliceTablet.setPinned(false, in: withBob)
            _ = try await alicePhone.liveConversations().first { $0.first?.id == withCarol ? true : nil }

            // The draft stays on its device.
            try await alicePhone.setDraft("half a thought", in: withBob)
            #expect(try await alicePhone.conversations().first { $0.id == withBob }?.draft == "half a thought")
            #expect(try await aliceTablet.conversations().first { $0.id == withBob }?.draft == nil)
        }
    }

    @Test(
        "a hidden conversation leaves the list on every device and a new install until a newer message; its messages stay",
        arguments: ServerBackend.available
    )
    func hideUntilNewer(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let withBob = ConversationID.direct("alice", "bob")
            let withCarol = ConversationID.direct("alice", "carol")
            let alicePhone = try await server.connectedClient("alice", device: "phone")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            _ = try await bob.send("from bob", to: withBob).stored()
            _ = try await alicePhone.send("to carol", to: withCarol).stored()
            _ = try await aliceTablet.liveConversations().first { $0.count == 2 ? true : nil }

            try await alicePhone.setHidden(true, in: withBob)
            #expect(try await alicePhone.conversations().map(\.id) == [withCarol])
            // The other device learns it live; a new install from its first sync.
            _ = try await aliceTablet.liveConversations().first { $0.map(\.id) == [withCarol] ? true : nil }
            let laptop = try await server.connectedClient("alice", device: "laptop")
            #expect(try await laptop.conversations().map(\.id) == [withCarol])
            // Hidden, not cleared: the messages stay, and still count as unread.
            #expect(try await alicePhone.messages(in: withBob).map(\.body) == ["from bob"])
            #expect(try await alicePhone.unreadCount(in: withBob) == 1)

            // A newer message shows it again on every device, with no request of alice's.
            _ = try await bob.send("still there?", to: withBob).stored()
            for device in [alicePhone, aliceTablet, laptop] {
                let listed = try await device.liveConversations().first { list in
                    list.count == 2 ? list.map(\.id) : nil
                }
                #expect(listed == [withBob, withCarol])
            }

            // Hidden again, then shown again at once.
            try await aliceTablet.setHidden(true, in: withBob)
            _ = try await alicePhone.liveConversations().first { $0.map(\.id) == [withCarol] ? true : nil }
            try await aliceTablet.setHidden(false, in: withBob)
            _ = try await alicePhone.liveConversations().first { $0.count == 2 ? true : nil }
        }
    }

    @Test(
        "view changes made offline show at once, throw nothing, and reach the server and the other devices in order on reconnect",
        arguments: ServerBackend.available
    )
    func viewChangesOffline(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let withBob = ConversationID.direct("alice", "bob")
            let alicePhone = try await server.connectedClient("alice", device: "phone")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            let one = try await bob.send("one", to: withBob).stored()
            _ = try await bob.send("two", to: withBob).stored()
            _ = try await alicePhone.liveMessages(in: withBob).first { $0.count == 2 ? true : nil }

            // Offline: every change returns at once and shows on this device.
            await alicePhone.disconnect()
            try await alicePhone.setMuted(true, in: withBob)
            try await alicePhone.setPinned(true, in: withBob)
            try await alicePhone.deleteForMe([one.id], in: withBob)
            let shown = try await alicePhone.conversations().first { $0.id == withBob }
            #expect(shown?.isMuted == true && shown?.isPinned == true)
            #expect(try await alicePhone.messages(in: withBob).map(\.body) == ["two"])
            // The server has none of it yet: the tablet still shows both messages, unmuted.
            #expect(try await aliceTablet.conversations().first { $0.id == withBob }?.isMuted == false)

            // Connected again, the changes go out in order; the other device and a new install get them.
            try await alicePhone.connect(account: "alice", token: try await server.token(for: "alice"))
            let tablet = try await aliceTablet.liveConversations().first { list in
                list.first { $0.id == withBob && $0.isMuted && $0.isPinned }
            }
            #expect(tablet.isMuted && tablet.isPinned)
            _ = try await aliceTablet.liveMessages(in: withBob).first { $0.map(\.body) == ["two"] ? true : nil }
            let laptop = try await server.connectedClient("alice", device: "laptop")
            #expect(try await laptop.conversations().first { $0.id == withBob }?.isMuted == true)
            #expect(try await laptop.messages(in: withBob).map(\.body) == ["two"])

            // Connected, a change returns once the server has it, and its refusal is thrown.
            try await alicePhone.setMuted(false, in: withBob)
            #expect(try await laptop.liveConversations().first { list in
                list.first { $0.id == withBob && !$0.isMuted }.map { _ in true }
            })
            await #expect(throws: CourierError.self) { try await alicePhone.deleteForMe([MessageID(rawValue: "nope")], in: withBob) }
        }
    }

    @Test("a badge can leave muted conversations out: muted on one device, left out on the other", arguments: ServerBackend.available)
    func badgeWithoutMuted(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let withCarol = ConversationID.direct("alice", "carol")
            let alicePhone = try await server.connectedClient("alice", device: "phone")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            _ = try await bob.send("from bob", to: .direct("alice", "bob")).stored()
            _ = try await carol.send("from carol", to: withCarol).stored()
            _ = try await carol.send("and again", to: withCarol).stored()
            _ = try await aliceTablet.liveTotalUnreadCount().first { $0 == 3 ? true : nil }

            try await alicePhone.setMuted(true, in: withCarol)
            // The tablet learns of the mute: its badge without muted conversations drops to bob's one message.
            let badge = try await aliceTablet.liveTotalUnreadCount(includingMuted: false).first { $0 == 1 ? $0 : nil }
            #expect(badge == 1)
            #expect(try await aliceTablet.totalUnreadCount() == 3)
            #expect(try await aliceTablet.totalUnreadCount(includingMuted: false) == 1)
        }
    }

    @Test("ext travels with a message over the wire and REST; a two-way recall removes it", arguments: ServerBackend.available)
    func ext(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let sent = try await alice.send("hi", to: direct, ext: ["orderId": "A-17", "priority": "high"]).stored()
            #expect(sent.ext == ["orderId": "A-17", "priority": "high"])
            let received = try await events.first { $0.receivedMessage?.id == sent.id ? $0.receivedMessage : nil }
            #expect(received.ext == ["orderId": "A-17", "priority": "high"])

            // Over REST, both ways.
            let body = #"{"from":"alice","clientId":"rest-1","body":"from the backend","ext":{"source":"crm"}}"#
            let (status, data) = try await server.restResponse("POST", "/v1/conversations/\(direct)/messages", body: body)
            #expect(status == 200)
            struct Ack: Decodable { let message: WireMessage }
            let viaREST = try JSONDecoder().decode(Ack.self, from: data).message
            #expect(viaREST.ext == ["source": "crm"])
            let (_, got) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages/\(sent.id)")
            #expect(try JSONDecoder().decode(WireMessage.self, from: got).ext == ["orderId": "A-17", "priority": "high"])

            // Too large, or a key too long: refused with a stable code, nothing stored.
            let huge = ["k": String(repeating: "x", count: WireMessage.maxExtBytes)]
            await #expect(throws: CourierError.self) { try await alice.send("no", to: direct, ext: huge).stored() }
            let tooLong = #"{"from":"alice","clientId":"rest-2","body":"x","ext":{"\#(String(repeating: "k", count: 65))":"v"}}"#
            let refused = try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: tooLong)
            #expect(refused.status == 400 && refused.code == "request.invalidArgument")

            try await alice.recall(sent.id, in: direct)
            // Bob's copy loses it too.
            _ = try await events.first { event -> Bool? in
                guard case .messageRecalled(let notice) = event, notice.messageID == sent.id else { return nil }
                return true
            }
            #expect(try await bob.message(sent.id)?.ext == nil)
            let (_, after) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages/\(sent.id)")
            #expect(try JSONDecoder().decode(WireMessage.self, from: after).ext == nil)

            // A one-way recall: the sender's account keeps the message with its ext, on a new install too.
            let kept = try await alice.send("kept", to: direct, ext: ["draft": "v2"]).stored()
            try await alice.recall(kept.id, in: direct, mode: .oneWay)
            let laptop = try await server.connectedClient("alice", device: "laptop")
            let synced = try await laptop.liveMessages(in: direct).first { items in
                items.compactMap(\.message).first { $0.id == kept.id }
            }
            #expect(synced.ext == ["draft": "v2"] && synced.body == "kept")
            let (_, peerCopy) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages/\(kept.id)")
            #expect(try JSONDecoder().decode(WireMessage.self, from: peerCopy).ext == nil, "everyone else: gone")
        }
    }

    /// An uploader that fails its first `failures` attempts, then "stores" the file and returns its address.
    final class FlakyUploader: AttachmentUploader {
        let failures: Int
        let attempts = Locked(0)
        init(failures: Int) { self.failures = failures }
        func upload(_ attachment: CourierSDK.Attachment, progress: @escaping @Sendable (Double) -> Void) async throws -> URL {
            let attempt = attempts.withLock { count in
                count += 1
                return count
            }
            progress(0.5)
            guard attempt > failures else { throw URLError(.networkConnectionLost) }
            progress(1)
            return URL(string: "https://cdn.example.com/uploads/\(attachment.url.lastPathComponent)")!
        }
    }

    @Test("an attachment's upload fails twice, then succeeds: the message goes out once, with its URL")
    func attachmentUpload() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let uploader = FlakyUploader(failures: 2)
            let alice = try await server.connectedClient("alice") { configuration in
                configuration.attachmentUploader = uploader
                configuration.reconnectBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(20))
            }
            let bob = try await server.connectedClient("bob")
            let aliceEvents = alice.events()
            let bobEvents = bob.events()
            let file = URL(filePath: "/tmp/beach.jpg")
            let photo = CourierSDK.Attachment(url: file, mimeType: "image/jpeg", size: 48_213, name: "beach.jpg")
            let sent = try await alice.send(.image(photo), to: direct).stored()
            guard case .image(let stored) = sent.content else { Issue.record("not an image: \(sent.content)"); return }
            #expect(stored.url.absoluteString == "https://cdn.example.com/uploads/beach.jpg")
            #expect(stored.name == "beach.jpg" && stored.size == 48_213)
            #expect(uploader.attempts.withLock { $0 } == 3)
            let progress = try await aliceEvents.first { event -> Double? in
                if case .uploadProgress(let update) = event, update.fraction == 1 { return update.fraction }
                return nil
            }
            #expect(progress == 1)
            let received = try await bobEvents.first { $0.receivedMessage }
            #expect(received.id == sent.id && received.content == sent.content)
            // Sent once: one message in the conversation, on the server too.
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).count == 1)
            #expect(try await alice.pendingMessages(in: direct).isEmpty)
        }
    }

    @Test("without an uploader of the app's own, a file attachment goes to the server's media: the recipient gets its address and fetches the same bytes with its token; an outsider cannot")
    func defaultUploader() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: { $0.media = .init(place: .folder(folder.path + "/media")) }) { server in
            try await server.register("alice", "bob", "carol")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let bytes = Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
            let file = URL(filePath: folder.path + "/beach.jpg")
            try bytes.write(to: file)
            let sent = try await alice.send(.image(CourierSDK.Attachment(url: file, mimeType: "image/jpeg")), to: direct).stored()
            let received = try await bobEvents.first { $0.receivedMessage.flatMap { $0.id == sent.id ? $0 : nil } }
            guard case .image(let attachment) = received.content else {
                Issue.record("not an image: \(received.content)")
                return
            }
            #expect(attachment.url.absoluteString.hasPrefix("http://127.0.0.1:\(server.port)/v1/media/md_"))
            // Over raw HTTP with bob's token, and through bob's SDK client.
            let fetched = try await MediaHTTP(base: "").send("GET", attachment.url.absoluteString, bearer: try await server.token(for: "bob"))
            #expect(fetched.status == 200 && fetched.body == bytes && fetched.headers["content-type"]?.first == "image/jpeg")
            #expect(try await bob.mediaData(at: attachment.url) == bytes)
            let carol = try await server.connectedClient("carol")
            await #expect(throws: CourierError.server(code: .mediaNotFound, message: "No such file, or not one you may fetch.")) {
                try await carol.mediaData(at: attachment.url)
            }
        }
    }

    @Test("the default uploader streams a large file from disk and reports its progress as the bytes go, then the stored file matches")
    func defaultUploaderProgress() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: { $0.media = .init(place: .folder(folder.path + "/media")) }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bytes = Data((0..<8_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) })
            let file = URL(filePath: folder.path + "/film.mp4")
            try bytes.write(to: file)
            let events = alice.events()  // before the send: no report is missed
            let sending = try await alice.send(.video(CourierSDK.Attachment(url: file, mimeType: "video/mp4")), to: direct)
            var fractions: [Double] = []
            for await event in events {
                guard case .uploadProgress(let progress) = event, progress.clientID == sending.clientID else { continue }
                fractions.append(progress.fraction)
                if progress.fraction >= 1 { break }
            }
            let sent = try await sending.stored()
            // Some progress between the start and the end, never going back.
            #expect(fractions.contains { $0 > 0 && $0 < 1 }, "\(fractions)")
            #expect(fractions == fractions.sorted())
            guard case .video(let attachment) = sent.content else { Issue.record("\(sent.content)"); return }
            #expect(try await alice.mediaData(at: attachment.url) == bytes)
        }
    }

    @Test("a file attachment with a preview on the device is refused at once; nothing is queued")
    func attachmentRefused() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let uploading = try await server.connectedClient("alice", device: "tablet") { configuration in
                configuration.attachmentUploader = FlakyUploader(failures: 0)
            }
            var local = CourierSDK.Attachment(url: URL(string: "https://cdn.example.com/x.jpg")!, mimeType: "image/jpeg")
            local.thumbnailURL = URL(filePath: "/tmp/x-small.jpg")
            await #expect(throws: CourierError.self) { try await uploading.send(.image(local), to: direct).stored() }
            #expect(try await alice.pendingMessages(in: direct).isEmpty)
            #expect(try await uploading.pendingMessages(in: direct).isEmpty)
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).isEmpty)
        }
    }

    /// An uploader that answers only once the test lets it (a slow network).
    final class GatedUploader: AttachmentUploader {
        let started = AsyncStream.makeStream(of: Void.self)
        let gate = AsyncStream.makeStream(of: Void.self)
        func upload(_ attachment: CourierSDK.Attachment, progress: @escaping @Sendable (Double) -> Void) async throws -> URL {
            started.continuation.yield()
            for await _ in gate.stream { break }
            return URL(string: "https://cdn.example.com/slow.jpg")!
        }
    }

    @Test("a slow upload holds back nothing else: a text sent after it goes out while it runs")
    func slowUpload() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let uploader = GatedUploader()
            let alice = try await server.connectedClient("alice") { configuration in
                configuration.attachmentUploader = uploader
            }
            let photo = CourierSDK.Attachment(url: URL(filePath: "/tmp/slow.jpg"), mimeType: "image/jpeg")
            let queued = try await alice.send(.image(photo), to: direct).clientID
            var started = uploader.started.stream.makeAsyncIterator()
            _ = await started.next()
            // While the upload hangs, a text goes out and is acknowledged.
            let text = try await alice.send("meanwhile", to: direct).stored()
            #expect(text.status == .sent)
            #expect(try await alice.pendingMessages(in: direct).map(\.clientID) == [queued])
            uploader.gate.continuation.yield()
            let photoSent = try await alice.liveMessages(in: direct).first { items in
                items.compactMap(\.message).first { $0.clientID == queued }
            }
            guard case .image(let stored) = photoSent.content else { Issue.record("\(photoSent.content)"); return }
            #expect(stored.url.absoluteString == "https://cdn.example.com/slow.jpg")
        }
    }
}
