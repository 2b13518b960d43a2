// Courier — Apache-2.0
import CourierSDK
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Everyday message operations (issue 37, ADR 0029), with real SDK clients against a real server on both backends:
/// delete for me, clear, mute and pin reach the account's other device and a new install; `ext` travels with a
/// message; an attachment is uploaded through the outbox before its message goes out, once.
@Suite("Message operations", .timeLimit(.minutes(2)))
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
            for text in ["one", "two", "three", "four"] { sent.append(try await alice.send(text, to: direct)) }
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
            let five = try await alice.send("five", to: direct)
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
            let elsewhere = try await alice.send("elsewhere", to: .group("g"))
            await #expect(throws: CourierError.self) { try await bobPhone.deleteForMe([elsewhere.id], in: direct) }
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
            _ = try await alicePhone.send("to bob", to: withBob)
            _ = try await alicePhone.send("to carol", to: withCarol)
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

    @Test("ext travels with a message over the wire and REST; a two-way recall removes it", arguments: ServerBackend.available)
    func ext(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let sent = try await alice.send("hi", to: direct, ext: ["orderId": "A-17", "priority": "high"])
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
            await #expect(throws: CourierError.self) { try await alice.send("no", to: direct, ext: huge) }
            let tooLong = #"{"from":"alice","clientId":"rest-2","body":"x","ext":{"\#(String(repeating: "k", count: 65))":"v"}}"#
            let refused = try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: tooLong)
            #expect(refused.status == 400 && refused.code == "request.invalidArgument")

            try await alice.recall(sent.id, in: direct)
            let (_, after) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages/\(sent.id)")
            #expect(try JSONDecoder().decode(WireMessage.self, from: after).ext == nil)
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
            let sent = try await alice.send(.image(photo), to: direct)
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

    @Test("without an uploader, a file attachment fails instead of going out with a device path")
    func attachmentWithoutUploader() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let photo = CourierSDK.Attachment(url: URL(filePath: "/tmp/x.jpg"), mimeType: "image/jpeg")
            await #expect(throws: CourierError.uploadFailed("No attachment uploader is configured for a file attachment.")) {
                try await alice.send(.image(photo), to: direct)
            }
            #expect(try await alice.pendingMessages(in: direct).map(\.status) == [.failed])
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).isEmpty)
        }
    }
}
