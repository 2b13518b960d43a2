// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Webhook batches (ADR 0041): an endpoint that asks for `batch` gets up to that many events of one
/// conversation per request, as a signed JSON array verified by the Standard Webhooks reference library; a batch that
/// is not accepted comes again as a batch, and the first arrival of every event is in order.
@Suite("Webhook batches", .timeLimit(.minutes(5)))
struct WebhookBatchTests {
    struct Endpoint: Decodable { let id: String; let secret: String?; let batch: Int }

    @Test(
        "batches: a conversation's events as signed arrays of at most N, each once in order; a refused batch comes again as a batch",
        arguments: ServerBackend.available
    )
    func batches(backend: ServerBackend) async throws {
        try await withTestServer(on: backend, configure: WebhookTests.fastRetries) { server in
            try await server.register("alice", "bob", "carol")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            // Out of range: refused with the stable code, nothing created.
            let (refused, refusal) = try await server.restResponse(
                "POST", "/v1/webhooks", body: #"{"url":"http://127.0.0.1:\#(port)\#(path)","batch":101}"#
            )
            #expect(refused == 400 && String(decoding: refusal, as: UTF8.self).contains("invalidArgument"))
            let (status, body) = try await server.restResponse(
                "POST", "/v1/webhooks",
                body: #"{"url":"http://127.0.0.1:\#(port)\#(path)","events":["message.created"],"batch":5}"#
            )
            #expect(status == 201)
            let endpoint = try JSONDecoder().decode(Endpoint.self, from: body)
            #expect(endpoint.batch == 5)
            // Paused while the messages are sent: they wait in the log and are read in one go when it resumes, so
            // the batches are full whatever the machine's pace.
            #expect(try await server.restResponse("POST", "/v1/webhooks/\(endpoint.id)/pause").0 == 200)

            let alice = try await server.connectedClient("alice")
            let toBob = ConversationID.direct("alice", "bob")
            let toCarol = ConversationID.direct("alice", "carol")
            var sent: [MessageID: (ConversationID, Seq)] = [:]
            for index in 1...12 {
                let message = try await alice.send("bob \(index)", to: toBob).stored()
                sent[message.id] = (toBob, message.seq)
            }
            for index in 1...3 {
                let message = try await alice.send("carol \(index)", to: toCarol).stored()
                sent[message.id] = (toCarol, message.seq)
            }

            // The first request it gets is answered 503: its events come again.
            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [try #require(endpoint.secret)], failFirst: 1)
            defer { receiver.stop() }
            #expect(try await server.restResponse("POST", "/v1/webhooks/\(endpoint.id)/resume").0 == 200)
            var delivered: Set<MessageID> = []
            let all = await receiver.collect { all in
                for request in all.suffix(1) where request.status == 204 {
                    delivered.formUnion((request.batch ?? []).compactMap { $0.data.message?.id })
                }
                return delivered.isSuperset(of: sent.keys)
            }

            let unverified = all.filter { !$0.verified }.compactMap(\.error)
            #expect(unverified.isEmpty, "\(unverified)")
            // Every request is an array of at most 5 events of one conversation, in the conversation's order, and its
            // webhook-id names its first event and how many follow.
            for request in all {
                let events = try #require(request.batch, "a batching endpoint gets arrays only")
                #expect((1...5).contains(events.count))
                let messages = events.compactMap { $0.data.message }
                #expect(Set(messages.map(\.conversation)).count == 1)
                #expect(messages.map(\.seq) == messages.map(\.seq).sorted())
                let first = try #require(events.first?.id)
                #expect(request.id == (events.count == 1 ? first : "\(first)+\(events.count - 1)"))
            }
            #expect(all.contains { ($0.batch?.count ?? 0) == 5 }, "the backlog went out in full batches")
            // The refused batch's events came again once, together, at the head of a batch: retries go out in the
            // endpoint's batches too.
            let failed = try #require(all.first { $0.status == 503 }?.batch).map(\.id)
            #expect(failed.count > 1)
            for event in failed {
                let again = all.filter { $0.status == 204 && $0.batch?.contains { $0.id == event } == true }
                #expect(again.count == 1, "\(event ?? "?") came again once")
                #expect(again.first.map { Array(($0.batch ?? []).prefix(failed.count).map(\.id)) } == failed)
            }
            // The first arrival of each event, per conversation, is the conversation's order; none is missing.
            var firstArrivals: [ConversationID: [Seq]] = [:]
            var seen: Set<String> = []
            for request in all {
                for event in request.batch ?? [] where seen.insert(event.id ?? "").inserted {
                    let message = try #require(event.data.message)
                    firstArrivals[message.conversation, default: []].append(message.seq)
                }
            }
            for conversation in [toBob, toCarol] {
                let expected = sent.values.filter { $0.0 == conversation }.map(\.1).sorted()
                #expect(firstArrivals[conversation] == expected, "\(conversation)")
            }

            // A field PATCH does not take is refused by name, and changes nothing.
            let (unknown, unknownBody) = try await server.restResponse(
                "PATCH", "/v1/webhooks/\(endpoint.id)", body: #"{"paused":false,"batch":0}"#
            )
            #expect(unknown == 400 && String(decoding: unknownBody, as: UTF8.self).contains("unknown field 'paused'"))
            let (_, kept) = try await server.restResponse("GET", "/v1/webhooks/\(endpoint.id)")
            #expect(try JSONDecoder().decode(Endpoint.self, from: kept).batch == 5)
            // Back to one event per request: the next one's body is the event itself.
            let (patched, patchedBody) = try await server.restResponse(
                "PATCH", "/v1/webhooks/\(endpoint.id)", body: #"{"batch":0}"#
            )
            let unbatched = try JSONDecoder().decode(Endpoint.self, from: patchedBody)
            #expect(patched == 200 && unbatched.batch == 0)
            let last = try await alice.send("alone", to: toCarol).stored()
            let single = await receiver.collect { $0.last?.payload?.data.message?.id == last.id }.last
            #expect(single?.verified == true && single?.batch == nil && single?.id != nil)
        }
    }

    @Test(
        "a refused batch whose oldest event's retries ran out and a younger one's did not holds back what comes after",
        arguments: ServerBackend.available
    )
    func refusedAcrossTheRetryPeriod(backend: ServerBackend) async throws {
        // The server's clock, which the test moves an hour on (retries for an hour, each 5-10 minutes after the
        // one before), and the receiver's with it: the verifier refuses a signature more than 5 minutes off its clock.
        let skew = Locked<Int64>(0)
        let now = { @Sendable in Timestamp(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) + skew.withLock { $0 }) }
        let clockFile = FileManager.default.temporaryDirectory.appending(path: "clock-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: clockFile) }
        let minute: Int64 = 60_000
        let moveClock = { (by: Int64) throws in
            let skewed = skew.withLock { skew in
                skew += by
                return skew
            }
            try String(skewed).write(toFile: clockFile, atomically: true, encoding: .utf8)
        }
        try moveClock(0)
        try await withTestServer(on: backend, configure: { configuration in
            configuration.now = now
            configuration.webhooks.retry = WebhookRetryPolicy(
                period: .seconds(3600), initial: .seconds(600), maximum: .seconds(600)
            )
            configuration.webhooks.pollInterval = .milliseconds(50)
        }) { server in
            try await server.register("alice", "bob")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let (status, body) = try await server.restResponse(
                "POST", "/v1/webhooks",
                body: #"{"url":"http://127.0.0.1:\#(port)\#(path)","events":["message.created"],"batch":2}"#
            )
            #expect(status == 201)
            let endpoint = try JSONDecoder().decode(Endpoint.self, from: body)
            // Paused from the start, as an endpoint left paused for longer than its retries last: A is sent, then B
            // and C 40 minutes later; it resumes 70 minutes after A. The first request is refused.
            #expect(try await server.restResponse("POST", "/v1/webhooks/\(endpoint.id)/pause").0 == 200)
            let receiver = try await WebhookReceiver(
                port: port, path: path, secrets: [try #require(endpoint.secret)], failFirst: 1, clockFile: clockFile
            )
            defer { receiver.stop() }
            let alice = try await server.connectedClient("alice")
            let toBob = ConversationID.direct("alice", "bob")
            let a = try await alice.send("a", to: toBob).stored()
            try moveClock(40 * minute)
            let b = try await alice.send("b", to: toBob).stored()
            let c = try await alice.send("c", to: toBob).stored()
            try moveClock(30 * minute)
            #expect(try await server.restResponse("POST", "/v1/webhooks/\(endpoint.id)/resume").0 == 200)
            // A and B go together and are refused: A's hour is over, so it fails for good; B is retried 5-10 minutes
            // on, and C, behind B, waits for it.
            let refused = await receiver.collect { $0.count == 1 }
            try #require(refused.first?.batch?.compactMap { $0.data.message?.id } == [a.id, b.id], "\(refused)")
            // The clock moves on once the refusal is recorded (A failed, B's retry time in the same write): B's retry
            // time is reckoned from when the answer came.
            let recorded = ContinuousClock.now + .seconds(30)
            var failed: [WebhookTests.Delivery] = []
            while failed.isEmpty, ContinuousClock.now < recorded {
                failed = try await WebhookTests.deliveries(server, endpoint.id, state: "failed")
            }
            // A's retries ran out: it failed for good after its one attempt.
            #expect(failed.map(\.eventId) == [refused.first?.batch?.first?.id] && failed.first?.attempts == 1)
            try moveClock(15 * minute)
            var accepted: [MessageID] = []
            _ = await receiver.collect { all in
                accepted += (all.last?.status == 204 ? all.last?.batch ?? [] : []).compactMap { $0.data.message?.id }
                return accepted.count >= 2
            }
            #expect(accepted == [b.id, c.id], "B arrives before C")
        }
    }
}

