// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import Foundation
import Testing

/// Message content: text, attachments by reference and app-defined types, with a `type` the server sees
/// and stores while the body stays opaque. Real SDK clients on a real server, on every backend.
@Suite("Message content", .timeLimit(.minutes(5)))
struct MessageContentTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("attachments and app-defined messages arrive as sent; the server stores their type", arguments: ServerBackend.available)
    func roundTrip(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let photo = Attachment(
                url: URL(string: "https://cdn.example.com/p/1.jpg")!,
                mimeType: "image/jpeg",
                size: 48_213,
                name: "beach.jpg",
                width: 1024,
                height: 768,
                thumbnailURL: URL(string: "https://cdn.example.com/p/1-thumb.jpg")!
            )
            let voice = Attachment(url: URL(string: "https://cdn.example.com/v/9.m4a")!, mimeType: "audio/mp4", duration: 3.5)
            let contents: [MessageContent] = [
                .text("hi"),
                .image(photo),
                .audio(voice),
                .file(Attachment(url: URL(string: "https://cdn.example.com/f/2.pdf")!, mimeType: "application/pdf")),
                .video(Attachment(url: URL(string: "https://cdn.example.com/m/3.mp4")!, mimeType: "video/mp4", duration: 12)),
                .custom(type: "location", json: #"{"lat":48.85,"lon":2.35}"#),
            ]
            var sent: [Message] = []
            for content in contents { sent.append(try await alice.send(content, to: conversation).stored()) }
            let received = try await events.collect(contents.count) { $0.receivedMessage }

            #expect(received.map(\.content) == contents)
            #expect(sent.map(\.content) == contents)
            #expect(received.map(\.type) == [nil, "image", "audio", "file", "video", "location"])
            for message in sent {
                #expect(try await server.store.message(message.id)?.type == message.type)
            }
            // The local store keeps the type: local queries answer the same content.
            #expect(try await bob.messages(in: conversation).map(\.content) == contents)
        }
    }

    @Test("a reply quotes text only; the type survives a one-way recall in the sender's copy")
    func replies() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let image = try await alice.send(
                .image(Attachment(url: URL(string: "https://cdn.example.com/p/1.jpg")!, mimeType: "image/jpeg")),
                to: conversation
            ).stored()
            let text = try await alice.send("look", to: conversation).stored()
            #expect(try await alice.send("nice", to: conversation, replyTo: image.id).stored().quote == nil)
            #expect(try await alice.send("yes", to: conversation, replyTo: text.id).stored().quote == "look")
            try await alice.recall(image.id, in: conversation, mode: .oneWay)
            let fresh = try await server.connectedClient("alice", device: "tablet")
            let kept = try #require(try await fresh.history(in: conversation).first { $0.id == image.id })
            #expect(kept.type == "image" && kept.content == image.content)
        }
    }

    @Test("a bad type is refused with invalidArgument, on the wire and in the SDK; `text` is no type at all")
    func badTypes() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            for type in ["image", "text", "9lives", "has space", String(repeating: "x", count: 65)] {
                await #expect(throws: CourierError.self) {
                    try await alice.send(.custom(type: type, json: "{}"), to: conversation).stored()
                }
            }
            #expect(try await alice.pendingMessages().isEmpty)

            let raw = ProtocolClient()
            try await raw.run(
                url: server.webSocketURL.absoluteString,
                token: try await server.token(for: "alice"),
                account: "alice",
                device: "raw"
            ) {
                for (index, type) in ["9lives", "has space", "", String(repeating: "x", count: 65)].enumerated() {
                    let request = SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "bad-\(index)"), type: type, body: "{}")
                    let reply = try await raw.request { .send($0, request) }
                    guard case .error(_, let error) = reply else {
                        Issue.record("type '\(type)' was accepted: \(reply)")
                        continue
                    }
                    #expect(error.code == .invalidArgument)
                }
                let named = SendRequest(conversation: conversation, clientID: "named-text", type: "text", body: "plain")
                guard case .ack(_, .send(let ack)) = try await raw.request({ .send($0, named) }) else {
                    Issue.record("text was refused")
                    return
                }
                #expect(ack.message.type == nil)
            }
            let stored = try await server.store.messages(in: conversation, after: .zero, limit: 10)
            #expect(stored.map(\.clientID) == ["named-text"])
        }
    }
}
