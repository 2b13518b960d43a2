// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierTestSupport
import Foundation
import Testing

/// `GET /metrics` (issue 21): after a scripted workload, the counters moved by exactly what the workload did, as the
/// official Prometheus client's text-format parser reads them (`prometheus_client` from PyPI, installed by `.ci/run`).
@Suite("Metrics", .timeLimit(.minutes(2)))
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
        let parsed = output.fileHandleForReading.readDataToEndOfFile()
        parser.waitUntilExit()
        #expect(parser.terminationStatus == 0, "the Prometheus parser refused the exposition")
        return try JSONDecoder().decode([Sample].self, from: parsed)
    }

    func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
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
            for index in 1...5 { try await alice.send("m\(index)", to: .direct("alice", "bob")) }
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
                let pages = try #require(value(after, "courier_sync_pages_total"))
                #expect(pages >= 2)  // each SDK client syncs at connect
                #expect((value(after, "courier_frames_out_total") ?? 0) >= 5 + 5 + 3)  // acks, events, connects
            }
            #expect(try await server.rest("GET", "/metrics", secret: false).status == 401)
        }
    }
}
