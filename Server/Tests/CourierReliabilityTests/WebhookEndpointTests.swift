// Courier — Apache-2.0
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

/// The app's backend managing its webhook endpoints: listed, looked up and removed through the REST API on
/// every backend, a failed delivery retried on its own, the end of a rotated secret's overlap, and a slow endpoint
/// that holds back nobody else. Deliveries are verified by the Standard Webhooks reference library
/// (`Tests/Tools/webhook_receiver.py`).
@Suite("Webhook endpoints", .timeLimit(.minutes(5)))
struct WebhookEndpointTests {
    struct Endpoint: Decodable, Equatable {
        let id: String
        let url: String
        let events: [String]?
    }
    struct Endpoints: Decodable { let endpoints: [Endpoint] }

    /// A message the app's backend sends as `from` (no device, no token: nothing here depends on the server's clock
    /// agreeing with a token's).
    static func send(_ server: TestServer, _ body: String, from: String, to conversation: String) async throws -> String {
        let (status, data) = try await server.restResponse(
            "POST",
            "/v1/conversations/\(conversation)/messages",
            body: #"{"from":"\#(from)","clientId":"\#(UUID().uuidString)","body":"\#(body)"}"#
        )
        #expect(status == 200 || status == 201)
        struct Sent: Decodable { struct Message: Decodable { let id: String }; let message: Message }
        return try JSONDecoder().decode(Sent.self, from: data).message.id
    }

    @Test("endpoints are listed without their secrets, looked up, removed with their pending deliveries; a failed delivery is retried on its own", arguments: ServerBackend.available)
    func managed(backend: ServerBackend) async throws {
        try await withTestServer(on: backend, configure: WebhookTests.shortRetryPeriod) { server in
            try await server.register("alice", "bob")
            // Nothing listens on either endpoint yet: deliveries are tried, refused, and kept.
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let kept = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
            let removed = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(port)/elsewhere")

            let (status, body) = try await server.restResponse("GET", "/v1/webhooks")
            #expect(status == 200)
            let listed = try JSONDecoder().decode(Endpoints.self, from: body).endpoints
            #expect(listed.map(\.id) == [kept.id, removed.id], "oldest first")
            #expect(listed.first?.events == ["message.created"] && listed.last?.events == nil)
            // No endpoint is listed with its secret.
            let objects = (try JSONSerialization.jsonObject(with: body) as? [String: Any])?["endpoints"] as? [[String: Any]]
            let keys = Set((objects ?? []).flatMap(\.keys))
            #expect(keys.contains("url"))
            #expect(!keys.contains("secret") && !String(decoding: body, as: UTF8.self).contains(kept.secret))
            let (oneStatus, one) = try await server.restResponse("GET", "/v1/webhooks/\(kept.id)")
            #expect(oneStatus == 200)
            #expect(try JSONDecoder().decode(Endpoint.self, from: one) == listed.first)
            let unknown = try await server.rest("GET", "/v1/webhooks/whep_none")
            #expect(unknown.status == 404 && unknown.code == "request.notFound")

            let messageID = try await Self.send(server, "hello", from: "alice", to: "d:alice:bob")
            // Both endpoints have the delivery; past the retry period it is failed for both.
            var failed: [WebhookTests.Delivery] = []
            for _ in 0..<200 {
                failed = try await WebhookTests.deliveries(server, kept.id, state: "failed")
                let other = try await WebhookTests.deliveries(server, removed.id, state: "failed")
                if failed.count == 1 && other.count == 1 { break }
                try await Task.sleep(for: .milliseconds(50))  // polling a state, bounded
            }
            #expect(failed.count == 1)

            // Removing an endpoint removes its deliveries: it is gone from the list, its look-up and its deliveries.
            #expect(try await server.rest("DELETE", "/v1/webhooks/\(removed.id)").status == 204)
            #expect(try await server.rest("GET", "/v1/webhooks/\(removed.id)").status == 404)
            #expect(try await server.rest("GET", "/v1/webhooks/\(removed.id)/deliveries").status == 404)
            #expect(try await server.rest("DELETE", "/v1/webhooks/\(removed.id)").code == "request.notFound")
            let after = try JSONDecoder().decode(Endpoints.self, from: try await server.restResponse("GET", "/v1/webhooks").body)
            #expect(after.endpoints.map(\.id) == [kept.id])

            // The failed delivery, retried by its seq, arrives with the event's id unchanged.
            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [kept.secret])
            defer { receiver.stop() }
            let (retryStatus, retried) = try await server.restResponse("POST", "/v1/webhooks/\(kept.id)/deliveries/\(failed[0].seq)/retry")
            #expect(retryStatus == 200)
            #expect(try JSONDecoder().decode(WebhookTests.Retried.self, from: retried).retried == 1)
            let delivery = await receiver.next()
            #expect(delivery?.verified == true && delivery?.payload?.data.message?.id.rawValue == messageID)
            #expect(delivery?.id == failed[0].eventId)
            // Nothing else was pending for it: the next arrival is the next event.
            let next = try await Self.send(server, "again", from: "alice", to: "d:alice:bob")
            #expect(await receiver.next()?.payload?.data.message?.id.rawValue == next)
        }
    }

    @Test("a paused endpoint's deliveries wait unattempted; PATCHed to a new URL and resumed, they arrive there in order", arguments: ServerBackend.available)
    func pauseAndPatch(backend: ServerBackend) async throws {
        try await withTestServer(on: backend, configure: WebhookTests.fastRetries) { server in
            try await server.register("alice", "bob")
            let (oldPort, newPort, otherPort) = (try await freePort(), try await freePort(), try await freePort())
            let (oldPath, newPath, otherPath) = (WebhookReceiver.uniquePath(), WebhookReceiver.uniquePath(), WebhookReceiver.uniquePath())
            let paused = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(oldPort)\(oldPath)", events: ["message.created"])
            let other = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(otherPort)\(otherPath)", events: ["message.created"])
            struct Shown: Decodable { let url: String; let pausedAt: Int64?; let events: [String]? }
            let (status, body) = try await server.restResponse("POST", "/v1/webhooks/\(paused.id)/pause")
            let pausedAt = try JSONDecoder().decode(Shown.self, from: body).pausedAt
            #expect(status == 200 && pausedAt != nil)

            var sent: [String] = []
            for index in 0..<3 { sent.append(try await Self.send(server, "m\(index)", from: "alice", to: "d:alice:bob")) }
            // The other endpoint gets all three, and the paused endpoint's stream takes none of its own (each still
            // pending, never attempted).
            let otherReceiver = try await WebhookReceiver(port: otherPort, path: otherPath, secrets: [other.secret])
            defer { otherReceiver.stop() }
            for id in sent { #expect(await otherReceiver.next()?.payload?.data.message?.id.rawValue == id) }
            let waiting = try await WebhookTests.deliveries(server, paused.id)
            #expect(waiting.count == 3 && waiting.allSatisfy { $0.state == "pending" && $0.attempts == 0 })

            // Both fields of a PATCH at once are refused; an unknown endpoint is 404.
            let both = try await server.rest("PATCH", "/v1/webhooks/\(paused.id)", body: #"{"events":["message.read"],"allEvents":true}"#)
            #expect(both.status == 400 && both.code == "request.invalidArgument")
            #expect(try await server.rest("PATCH", "/v1/webhooks/whep_nothing", body: "{}").code == "request.notFound")
            let (patched, shown) = try await server.restResponse(
                "PATCH", "/v1/webhooks/\(paused.id)", body: #"{"url":"http://127.0.0.1:\#(newPort)\#(newPath)"}"#
            )
            #expect(patched == 200)
            let after = try JSONDecoder().decode(Shown.self, from: shown)
            #expect(after.url.hasSuffix("\(newPort)\(newPath)") && after.events == ["message.created"] && after.pausedAt != nil)

            let receiver = try await WebhookReceiver(port: newPort, path: newPath, secrets: [paused.secret])
            defer { receiver.stop() }
            let (resumed, _) = try await server.restResponse("POST", "/v1/webhooks/\(paused.id)/resume")
            #expect(resumed == 200)
            for id in sent { #expect(await receiver.next()?.payload?.data.message?.id.rawValue == id) }
        }
    }

    @Test("once a rotated secret's overlap is over, deliveries carry one signature, the new secret's", arguments: ServerBackend.available)
    func overlapEnds(backend: ServerBackend) async throws {
        // The server's clock runs 24 hours and a minute behind while the secret is rotated, then catches up: the
        // deliveries that follow are signed at the real time (the verifier refuses timestamps more than 5 minutes
        // off), after the overlap.
        let offset = Atomic<Int64>(-(24 * 3600 + 60) * 1000)
        try await withTestServer(on: backend, configure: { configuration in
            WebhookTests.fastRetries(&configuration)
            configuration.now = { Timestamp(milliseconds: Timestamp.now().rawValue + offset.load(ordering: .relaxed)) }
        }) { server in
            try await server.register("alice", "bob")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
            let (status, body) = try await server.restResponse("POST", "/v1/webhooks/\(created.id)/secret")
            #expect(status == 200)
            let rotated = try JSONDecoder().decode(WebhookTests.Rotated.self, from: body)
            offset.store(0, ordering: .relaxed)

            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret, rotated.secret])
            defer { receiver.stop() }
            let id = try await Self.send(server, "after the overlap", from: "alice", to: "d:alice:bob")
            let delivery = await receiver.next()
            #expect(delivery?.payload?.data.message?.id.rawValue == id)
            #expect(delivery?.signatures == 1)
            #expect(delivery?.verifiedBy == [1], "verified by the new secret only")
        }
    }

    @Test("an endpoint that does not answer holds back no other endpoint, and gets every event once it answers", arguments: ServerBackend.available)
    func slowEndpoint(backend: ServerBackend) async throws {
        let release = FileManager.default.temporaryDirectory.appending(path: "release-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: release) }
        try await withTestServer(on: backend, configure: { configuration in
            WebhookTests.fastRetries(&configuration)
            // Two requests at once to one endpoint: the slow endpoint can take only its share.
            configuration.webhooks.maxInFlightPerEndpoint = 2
            configuration.webhooks.attemptTimeout = .seconds(60)
        }) { server in
            let peers = ["bob", "carol", "dave", "erin"]
            for account in ["alice"] + peers { try await server.register(AccountID(rawValue: account)) }
            let slowPort = try await freePort()
            let slowPath = WebhookReceiver.uniquePath()
            let slowEndpoint = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(slowPort)\(slowPath)", events: ["message.created"])
            let slow = try await WebhookReceiver(port: slowPort, path: slowPath, secrets: [slowEndpoint.secret], holdFile: release)
            defer { slow.stop() }
            let fastPort = try await freePort()
            let fastPath = WebhookReceiver.uniquePath()
            let fastEndpoint = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(fastPort)\(fastPath)", events: ["message.created"])
            let fast = try await WebhookReceiver(port: fastPort, path: fastPath, secrets: [fastEndpoint.secret])
            defer { fast.stop() }

            // Five messages in each of four conversations.
            var sent: [String: [String]] = [:]
            for round in 1...5 {
                for peer in peers {
                    let conversation = "d:alice:\(peer)"
                    sent[conversation, default: []].append(try await Self.send(server, "m\(round)", from: "alice", to: conversation))
                }
            }
            // The slow endpoint has a delivery it does not answer; meanwhile the fast one gets all twenty.
            let first = await slow.next()
            #expect(first?.held == true)
            var fastIDs: Set<String> = []
            while fastIDs.count < 20, let delivery = await fast.next() {
                #expect(delivery.verified)
                if let id = delivery.payload?.data.message?.id.rawValue { fastIDs.insert(id) }
            }
            #expect(fastIDs == Set(sent.values.joined()))

            // Let the slow endpoint answer: every event reaches it, each conversation's in order. While it held its
            // answers it was sent no more than its share of requests, one delivery each.
            FileManager.default.createFile(atPath: release, contents: nil)
            var arrivals: [String: [String]] = [:]
            var whileHeld = 1
            if let message = first?.payload?.data.message {
                arrivals[message.conversation.rawValue] = [message.id.rawValue]
            }
            while Set(arrivals.values.joined()).count < 20, let delivery = await slow.next() {
                #expect(delivery.verified)
                if delivery.held == true { whileHeld += 1 }
                guard let message = delivery.payload?.data.message else { continue }
                if !arrivals[message.conversation.rawValue, default: []].contains(message.id.rawValue) {
                    arrivals[message.conversation.rawValue, default: []].append(message.id.rawValue)
                }
            }
            #expect(arrivals == sent)
            #expect(whileHeld <= 2, "deliveries sent to the endpoint while it did not answer: \(whileHeld)")
        }
    }

    @Test("a retry waiting for its answer holds back only its own conversation: the endpoint's others go on", arguments: ServerBackend.available)
    func retryBesideTheLog(backend: ServerBackend) async throws {
        let release = FileManager.default.temporaryDirectory.appending(path: "release-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: release) }
        try await withTestServer(on: backend, configure: { configuration in
            WebhookTests.fastRetries(&configuration)
            // An attempt may wait ten minutes for its answer: a stream that waited for its retry before reading the
            // log would hold the second conversation's event past this suite's time limit.
            configuration.webhooks.attemptTimeout = .seconds(600)
        }) { server in
            for account in ["alice", "bob", "carol"] { try await server.register(AccountID(rawValue: account)) }
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await WebhookTests.endpoint(server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
            // The first delivery is refused; its retry is answered only once the test lets it go.
            let receiver = try await WebhookReceiver(
                port: port, path: path, secrets: [created.secret], holdRepeatsFile: release, failFirst: 1
            )
            defer { receiver.stop() }
            let first = try await Self.send(server, "one", from: "alice", to: "d:alice:bob")
            let refused = try #require(await receiver.next())
            #expect(refused.status == 503 && refused.payload?.data.message?.id.rawValue == first)
            let retried = try #require(await receiver.next())
            #expect(retried.id == refused.id && retried.held == true)

            // While the retry waits, another conversation's event is delivered.
            let second = try await Self.send(server, "two", from: "alice", to: "d:alice:carol")
            let other = try #require(await receiver.next())
            #expect(other.payload?.data.message?.id.rawValue == second && other.status == 204 && other.held == nil)

            // And the first conversation's next event waits behind its retry: it comes once the retry is accepted.
            let third = try await Self.send(server, "three", from: "alice", to: "d:alice:bob")
            FileManager.default.createFile(atPath: release, contents: nil)
            let next = try #require(await receiver.next())
            #expect(next.payload?.data.message?.id.rawValue == third)
            let deliveries = try await WebhookTests.deliveries(server, created.id)
            #expect(deliveries.first { $0.eventId == refused.id }.map { ($0.state, $0.attempts) } ?? ("", 0) == ("delivered", 2))
        }
    }
}
