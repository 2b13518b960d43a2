// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// `GET /metrics`: after a scripted workload, the counters moved by exactly what the workload did, as the
/// official Prometheus client's text-format parser reads them (`prometheus_client` from PyPI, installed by `.ci/run`).
// 5 minutes: the outbound-queue test pushes 30 MB through the debug build and went past 2 minutes in a full parallel
// run on two cores.
@Suite("Metrics", .timeLimit(.minutes(5)))
struct MetricsTests {
    /// One sample of the exposition: a name, its labels, a value.
    struct Sample: Decodable, Hashable {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    /// Scrapes the server and parses the exposition with the Prometheus client library's parser (which refuses
    /// malformed text).
    func scrape(_ server: TestServer) async throws -> [Sample] {
        let (status, body) = try await server.restResponse("GET", "/metrics")
        #expect(status == 200)
        let parser = Process()
        parser.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        parser.arguments = [
            "python3", "-c",
            """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            samples = [
                {"name": s.name, "labels": s.labels, "value": s.value}
                for family in text_string_to_metric_families(sys.stdin.read())
                for s in family.samples
            ]
            json.dump(samples, sys.stdout)
            """,
        ]
        let input = Pipe()
        let output = Pipe()
        parser.standardInput = input
        parser.standardOutput = output
        try parser.run()
        input.fileHandleForWriting.write(body)
        try input.fileHandleForWriting.close()
        // Off the concurrency pool's two threads, which the in-process servers need meanwhile.
        let parsed = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: output.fileHandleForReading.readDataToEndOfFile()) }
        }
        parser.waitUntilExit()
        #expect(parser.terminationStatus == 0, "the Prometheus parser refused the exposition")
        return try JSONDecoder().decode([Sample].self, from: parsed)
    }

    func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    @Test("the labelled counters an alert watches exist at 0 from the first scrape")
    func zeroFromTheStart() async throws {
        try await withTestServer { server in
            let samples = try await scrape(server)
            #expect(value(samples, "courier_store_reachable") == 1)
            for type in ["message.created", "message.read", "message.recalled", "message.undelivered"] {
                #expect(value(samples, "courier_webhook_failures_total", ["type": type]) == 0, "\(type)")
                #expect(value(samples, "courier_webhook_failed_attempts_total", ["type": type]) == 0, "\(type)")
                #expect(value(samples, "courier_webhook_deliveries_total", ["type": type]) == 0, "\(type)")
            }
            #expect(value(samples, "courier_errors_total", ["code": "internal"]) == 0)
            #expect(value(samples, "courier_errors_total", ["code": "auth.throttled"]) == 0)
        }
    }

    @Test("after a scripted workload the counters moved by what it did")
    func workload() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let before = try await scrape(server)
            #expect(value(before, "courier_frames_in_total", ["type": "send"]) == 0)
            #expect(value(before, "courier_devices_online") == 0)

            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            for index in 1...5 { try await alice.send("m\(index)", to: .direct("alice", "bob")).stored() }
            _ = try await events.collect(5) { $0.receivedMessage }

            // A raw device: one frame that is not JSON, one send into a conversation it is not in.
            let raw = ProtocolClient()
            try await raw.run(
                url: server.webSocketURL.absoluteString,
                token: try await server.token(for: "alice"),
                account: "alice",
                device: "raw"
            ) {
                try await raw.sendRaw("not json")
                let outsider = SendRequest(conversation: .direct("bob", "carol"), clientID: "x1", body: "hi")
                let reply = try await raw.request { .send($0, outsider) }
                guard case .error(_, let error) = reply else {
                    Issue.record("accepted: \(reply)")
                    return
                }
                #expect(error.code == .conversationNotAMember)

                let after = try await scrape(server)
                #expect(value(after, "courier_frames_in_total", ["type": "send"]) == 6)
                #expect(value(after, "courier_frames_in_total", ["type": "connect"]) == 3)
                #expect(value(after, "courier_frames_in_total", ["type": "invalid"]) == 1)
                #expect(value(after, "courier_request_duration_seconds_count", ["type": "send"]) == 6)
                #expect(value(after, "courier_errors_total", ["code": "conversation.notAMember"]) == 1)
                #expect(value(after, "courier_errors_total", ["code": "frame.invalid"]) == 1)
                #expect(value(after, "courier_devices_online") == 3)
                #expect(value(after, "courier_connections") == 3)
                // Every write was committed in a transaction the commit metrics counted: the 5 sends at least
                // (the refused send wrote nothing), in batches of one or more, each with its latency.
                let operations = try #require(value(after, "courier_commit_operations_sum"))
                let commits = try #require(value(after, "courier_commit_operations_count"))
                #expect(operations - (value(before, "courier_commit_operations_sum") ?? 0) >= 5)
                #expect(commits >= 1 && commits <= operations)
                // Each commit records both; the devices' receipts still commit in the background, and one may land
                // between the scrape's reads of the two.
                let timed = try #require(value(after, "courier_commit_duration_seconds_count"))
                #expect(abs(timed - commits) <= 1, "\(timed) commits timed, \(commits) counted")
                #expect(value(after, "courier_commit_operations_bucket", ["le": "256.0"]) == commits)
                let pages = try #require(value(after, "courier_sync_pages_total"))
                #expect(pages >= 2)  // each SDK client syncs at connect
                #expect((value(after, "courier_frames_out_total") ?? 0) >= 5 + 5 + 3)  // acks, events, connects
            }
            #expect(try await server.rest("GET", "/metrics", secret: false).status == 401)
            // HTTP requests by route template (never by account) and status: two look-ups, the scrapes, the
            // refused scrape, a path nothing serves.
            #expect(try await server.rest("GET", "/v1/accounts/alice").status == 200)
            #expect(try await server.rest("GET", "/v1/accounts/nobody").status == 404)
            #expect(try await server.rest("GET", "/v1/nothing-here").status == 404)
            let http = try await scrape(server)
            let account = ["method": "GET", "route": "/v1/accounts/{account}"]
            #expect(value(http, "courier_http_requests_total", account.merging(["status": "200"]) { $1 }) == 1)
            #expect(value(http, "courier_http_requests_total", account.merging(["status": "404"]) { $1 }) == 1)
            #expect(value(http, "courier_http_requests_total", ["method": "GET", "route": "/metrics", "status": "200"]) == 2)
            #expect(value(http, "courier_http_requests_total", ["method": "GET", "route": "/metrics", "status": "401"]) == 1)
            #expect(value(http, "courier_http_requests_total", ["method": "GET", "route": "unmatched", "status": "404"]) == 1)
            #expect(value(http, "courier_http_request_duration_seconds_count", ["route": "/v1/accounts/{account}"]) == 2)
            // The process's own figures, under the names dashboards expect.
            #expect((value(http, "process_resident_memory_bytes") ?? 0) > 1_000_000)
            #expect((value(http, "process_cpu_seconds_total") ?? 0) > 0)
            #expect((value(http, "process_open_fds") ?? 0) >= 3)
            #expect((value(http, "process_max_fds") ?? 0) >= (value(http, "process_open_fds") ?? 0))
            #expect(value(http, "courier_build_info", ["version": CourierBuild.version]) == 1)
        }
    }

    @Test("a device that does not read: its outbound queue shows in the gauges, then its cut-off in the counter")
    func outboundQueue() async throws {
        let bound = 16 << 20
        try await withTestServer(configure: {
            $0.limits.outboundQueueBytes = bound
            // A device that never answers a ping is closed at the next one, whatever its queue: no ping comes while
            // the test runs, however slow the machine (ThreadSanitizer), so what closes the hog is its queue.
            $0.limits.pingInterval = .seconds(3600)
            // Few large messages rather than many small ones.
            $0.limits.maxBodyBytes = 512 * 1024
            $0.limits.maxFrameBytes = 1 << 20
        }) { server in
            try await server.register("alice", "bob")
            // Bob's only device connects and never reads again.
            let hog = try RawSocket(port: server.port)
            #expect(await hog.upgrade())
            let connect = ClientFrame.connect(
                "c",
                ConnectRequest(token: try await server.token(for: "bob"), account: "bob", device: "hog")
            )
            await hog.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(connect).utf8)))
            let (text, _) = await hog.receive(until: #""request":"connect""#, timeout: .seconds(10))
            #expect(text.contains(#""type":"ack""#))

            let alice = try await server.connectedClient("alice")
            let body = String(repeating: "m", count: 500_000)
            // 30 messages of 500 kB: 15 MB, under the 16 MiB bound even if the kernel's socket buffers took none. A
            // connection answers one request at a time and publishes each message before taking the next, so once
            // the last is acknowledged the others are queued for the hog or sit in the socket buffers (at most a few
            // MB: the hog's receive buffer does not grow while it does not read, the server's send buffer stops at
            // 4 MB).
            for _ in 0..<30 { try await alice.send(body, to: .direct("alice", "bob")).stored() }
            let queued = try await scrape(server)
            let frames = try #require(value(queued, "courier_outbound_queue_frames"))
            let bytes = try #require(value(queued, "courier_outbound_queue_bytes"))
            print("outbound queue with one device not reading: \(Int(frames)) frames, \(Int(bytes)) bytes")
            #expect(bytes >= 4_000_000 && bytes <= Double(bound))
            // The hog's queue is the deepest; another device's may hold an ack or an event at the moment of the scrape.
            let deepest = try #require(value(queued, "courier_outbound_queue_max_frames"))
            #expect(deepest >= 8 && deepest * 500_000 <= bytes && deepest <= frames && frames <= deepest + 2)
            #expect(value(queued, "courier_slow_consumer_disconnects_total") == 0)

            // 30 more pass the bound: the hog is cut off, and the counter says so.
            for _ in 0..<30 { try await alice.send(body, to: .direct("alice", "bob")).stored() }
            #expect(await hog.receive(timeout: .seconds(10)).closed)
            #expect(value(try await scrape(server), "courier_slow_consumer_disconnects_total") == 1)
        }
    }

    @Test(
        "on PostgreSQL a node measures the lag of the changes it fans out from another node",
        .enabled(if: PostgresTestDatabase.isAvailable)
    )
    func changeFeedLag() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("alice", "bob")
                let bob = try await nodeB.server.connectedClient("bob")
                let events = bob.events()
                let alice = try await nodeA.server.connectedClient("alice")
                let before = try await scrape(nodeB.server)
                for index in 1...3 { try await alice.send("m\(index)", to: .direct("alice", "bob")).stored() }
                _ = try await events.collect(3) { $0.receivedMessage }
                // Each message reached bob through node B's change feed; its lag is counted once bob's device has it.
                let after = try await scrape(nodeB.server)
                let counted = (value(after, "courier_change_feed_lag_seconds_count") ?? 0)
                    - (value(before, "courier_change_feed_lag_seconds_count") ?? 0)
                #expect(counted >= 3)
                let lag = try #require(value(after, "courier_change_feed_lag_seconds_sum")) / max(counted, 1)
                #expect(lag > 0 && lag < 30, "mean lag \(lag) s")
                // Both nodes count their PostgreSQL transactions, one operation each.
                let commits = try await scrape(nodeA.server)
                #expect(value(commits, "courier_commit_operations_sum") == value(commits, "courier_commit_operations_count"))
                #expect((value(commits, "courier_commit_operations_count") ?? 0) >= 3)
            }
        }
    }
}
