// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Purging an account's messages (ADR 0028): nothing of the purged bodies stays in history, on a device
/// that was online, on a device that syncs afresh, in the webhook deliveries made afterwards, or in the SQLite files.
@Suite("Purge", .timeLimit(.minutes(5)))
struct PurgeTests {
    struct Result: Decodable, Equatable { let purged: Int; let more: Bool }

    @Test("an account's purge erases its messages everywhere, a page at a time, and quotes of them; others stay", arguments: ServerBackend.available)
    func accountPurge(backend: ServerBackend) async throws {
        let folder = try TemporaryFolder()
        let marker = "PURGED-\(UUID().uuidString.prefix(8))"
        let kept = "KEPT-\(UUID().uuidString.prefix(8))"
        let direct = ConversationID.direct("alice", "bob")
        let group = ConversationID.group("crew")
        try await withFreshBackend(backend, sqlite: .file(folder.path + "/courier.sqlite")) { testBackend in
            try await withTestServer(backend: testBackend, configure: WebhookTests.fastRetries) { server in
                try await server.register("alice", "bob", "carol")
                #expect(try await server.rest("POST", "/v1/groups", body: #"{"group":"crew","owner":"alice","members":["bob","carol"]}"#).status == 201)
                // An endpoint that takes every event, push included, paused: what it is owed waits in the store.
                let port = try await freePort()
                let path = WebhookReceiver.uniquePath()
                let endpoint = try await WebhookTests.endpoint(
                    server,
                    url: "http://127.0.0.1:\(port)\(path)",
                    events: ["message.created", "message.recalled", "message.undelivered"]
                )
                #expect(try await server.rest("POST", "/v1/webhooks/\(endpoint.id)/pause").status == 200)

                let bob = try await server.connectedClient("bob")
                let bobEvents = bob.events()
                let purgedIDs = [
                    try await WebhookEndpointTests.send(server, "\(marker) direct", from: "alice", to: direct.rawValue),
                    try await WebhookEndpointTests.send(server, "\(marker) group", from: "alice", to: group.rawValue),
                ]
                let (status, reply) = try await server.restResponse(
                    "POST",
                    "/v1/conversations/\(direct)/messages",
                    body: #"{"from":"bob","clientId":"r1","body":"\#(kept) reply","replyTo":"\#(purgedIDs[0])"}"#
                )
                #expect(status == 200)
                #expect(String(decoding: reply, as: UTF8.self).contains(marker))  // the quote holds the original's text
                _ = try await WebhookEndpointTests.send(server, "\(kept) group", from: "carol", to: group.rawValue)
                _ = try await bobEvents.first { $0.receivedMessage?.body.hasPrefix("\(kept) group") == true ? true : nil }
                if case .sqlite = backend { #expect(try folder.filesContain(marker)) }

                // A page of one, then the rest; then nothing is left, and a purge of nothing erases nothing.
                let before = Int64(Date().timeIntervalSince1970 * 1000) + 1
                func purge(_ limit: Int) async throws -> Result {
                    let (status, body) = try await server.restResponse(
                        "POST", "/v1/accounts/alice/purge", body: #"{"before":\#(before),"limit":\#(limit)}"#
                    )
                    #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
                    return try JSONDecoder().decode(Result.self, from: body)
                }
                #expect(try await purge(1) == Result(purged: 1, more: true))
                #expect(try await purge(10) == Result(purged: 1, more: false))
                #expect(try await purge(10) == Result(purged: 0, more: false))
                #expect(try await server.rest("POST", "/v1/accounts/nobody/purge", body: #"{"before":1}"#).code == "account.notFound")
                #expect(try await server.rest("POST", "/v1/accounts/alice/purge", body: #"{"before":1,"limit":0}"#).code == "request.invalidArgument")

                // History, as the app's backend reads it: tombstones, no quote of the purged text; the rest stays.
                for conversation in [direct, group] {
                    let (_, body) = try await server.restResponse("GET", "/v1/conversations/\(conversation)/messages?account=bob")
                    let text = String(decoding: body, as: UTF8.self)
                    #expect(!text.contains(marker), "\(text)")
                    #expect(text.contains(kept))
                }
                // The device that was online heard each recall and erased its copy, the reply's quote too.
                var recalled: Set<MessageID> = []
                while recalled.count < 2 {
                    let notice = try await bobEvents.first { event -> RecallNotice? in
                        if case .messageRecalled(let notice) = event { return notice }
                        return nil
                    }
                    #expect(notice.byApp)
                    recalled.insert(notice.messageID)
                }
                #expect(recalled == Set(purgedIDs.map(MessageID.init(rawValue:))))
                for conversation in [direct, group] {
                    let local = try await bob.messages(in: conversation, limit: 100)
                    #expect(!local.contains { $0.body.contains(marker) || ($0.quote ?? "").contains(marker) })
                    #expect(local.contains { $0.body.contains(kept) })
                }
                // A new device syncs what the server holds now.
                let fresh = try await server.connectedClient("bob", device: "fresh")
                for conversation in [direct, group] {
                    let synced = try await fresh.history(in: conversation, limit: 100)
                    #expect(!synced.contains { $0.body.contains(marker) || ($0.quote ?? "").contains(marker) })
                    #expect(synced.contains { $0.body.contains(kept) })
                }

                // The endpoint resumes: what it gets carries nothing purged (no `message.created` of a purged message, no
                // quote of one), and the two recalls come.
                let receiver = try await WebhookReceiver(port: port, path: path, secrets: [endpoint.secret])
                defer { receiver.stop() }
                #expect(try await server.rest("POST", "/v1/webhooks/\(endpoint.id)/resume").status == 200)
                let received = await receiver.collect { all in
                    all.filter { $0.payload?.type == "message.recalled" }.count == 2
                }
                for delivery in received {
                    let message = delivery.payload?.data.message
                    #expect(!(message?.body ?? "").contains(marker) && !(message?.quote ?? "").contains(marker))
                    if delivery.payload?.type != "message.recalled" {
                        #expect(!purgedIDs.contains(message?.id.rawValue ?? ""))
                    }
                }
                #expect(!received.contains { $0.payload?.type == "message.undelivered" && $0.payload?.data.message?.recall != nil })
            }
        }
        if case .sqlite = backend {
            #expect(try !folder.filesContain(marker))
            #expect(try folder.filesContain(kept))
        }
    }

    @Test("a conversation's purge erases what anyone sent there before the time, and only there")
    func conversationPurge() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            for (from, to) in [("alice", "d:alice:bob"), ("bob", "d:alice:bob"), ("alice", "d:alice:carol")] {
                _ = try await WebhookEndpointTests.send(server, "hello from \(from)", from: from, to: to)
            }
            let before = Int64(Date().timeIntervalSince1970 * 1000) + 1
            let (status, body) = try await server.restResponse(
                "POST", "/v1/conversations/d:alice:bob/purge", body: #"{"before":\#(before)}"#
            )
            #expect(status == 200)
            #expect(try JSONDecoder().decode(Result.self, from: body) == Result(purged: 2, more: false))
            let (_, erased) = try await server.restResponse("GET", "/v1/conversations/d:alice:bob/messages?account=bob")
            #expect(!String(decoding: erased, as: UTF8.self).contains("hello"))
            let (_, other) = try await server.restResponse("GET", "/v1/conversations/d:alice:carol/messages?account=carol")
            #expect(String(decoding: other, as: UTF8.self).contains("hello from alice"))
            #expect(try await server.rest("POST", "/v1/conversations/g:nothing/purge", body: #"{"before":1}"#).code == "group.notFound")

            // A message recalled one way keeps its body for its sender only: a purge takes that copy too.
            let secret = try await WebhookEndpointTests.send(server, "only alice sees this", from: "alice", to: "d:alice:carol")
            #expect(try await server.rest("POST", "/v1/conversations/d:alice:carol/recall", body: #"{"messageId":"\#(secret)","mode":"oneWay"}"#).status == 200)
            let (_, kept) = try await server.restResponse("GET", "/v1/conversations/d:alice:carol/messages?account=alice")
            #expect(String(decoding: kept, as: UTF8.self).contains("only alice sees this"))
            // A dismissed group's messages are left alone: the account's purge goes past them instead of failing.
            _ = try await server.rest("POST", "/v1/groups", body: #"{"group":"gone","owner":"bob","members":["alice"]}"#)
            _ = try await WebhookEndpointTests.send(server, "in a group that ends", from: "alice", to: "g:gone")
            #expect(try await server.rest("DELETE", "/v1/groups/gone").status == 200)
            let later = Int64(Date().timeIntervalSince1970 * 1000) + 1
            let (purgedStatus, purgedBody) = try await server.restResponse(
                "POST", "/v1/accounts/alice/purge", body: #"{"before":\#(later)}"#
            )
            #expect(purgedStatus == 200, "\(String(decoding: purgedBody, as: UTF8.self))")
            #expect(try JSONDecoder().decode(Result.self, from: purgedBody) == Result(purged: 1, more: false))
            let (_, gone) = try await server.restResponse("GET", "/v1/conversations/d:alice:carol/messages?account=alice")
            #expect(!String(decoding: gone, as: UTF8.self).contains("only alice sees this"))
            #expect(try await server.rest("POST", "/v1/conversations/x:y/purge", body: #"{"before":1}"#).status == 400)
        }
    }
}
