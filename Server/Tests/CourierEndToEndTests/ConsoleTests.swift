// Courier — Apache-2.0
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

/// The web console in a real headless browser: Debian's Chromium driven by Playwright from PyPI
/// (`Tests/Tools/console_check.py`, both installed by `.ci/run`), against a real server seeded through the REST API.
/// `COURIER_CONSOLE_SCREENSHOTS=docs/images` keeps the screenshots docs/console.md shows.
@Suite("Web console in a real browser", .timeLimit(.minutes(5)))
struct ConsoleTests {
    static let tools = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tools")

    @Test("sign in, look a group message up, page its unread list, retry a failed webhook, read the configuration")
    func console() async throws {
        // The server's clock moves only when the test says: the webhook's retry period then ends at once.
        let clock = Atomic<Int64>(Timestamp.now().rawValue)
        try await withTestServer(configure: { configuration in
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
            configuration.webhooks.retry = WebhookRetryPolicy(period: .seconds(3600), initial: .milliseconds(50), maximum: .milliseconds(300))
            configuration.webhooks.pollInterval = .milliseconds(50)
        }) { server in
            func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> Data {
                let (status, data) = try await server.restResponse(method, path, body: body)
                #expect((200..<300).contains(status), "\(method) \(path): \(String(decoding: data, as: UTF8.self))")
                return data
            }
            // A group of 25: 24 members besides alice, 3 of whom read her message.
            let members = (1...24).map { String(format: "m%02d", $0) }
            let accounts = (["alice"] + members).map { "\"\($0)\"" }.joined(separator: ",")
            _ = try await call("POST", "/v1/accounts", #"{"accounts":[\#(accounts)]}"#)
            _ = try await call("PUT", "/v1/accounts/alice/profile", #"{"displayName":"Alice","avatar":"https://example.com/a.png"}"#)
            // An endpoint that is never up: its delivery of the message fails for good once the retry period is over.
            struct Created: Decodable { let id: String }
            let endpoint = try JSONDecoder().decode(
                Created.self,
                from: try await call("POST", "/v1/webhooks", #"{"url":"http://127.0.0.1:1/down","events":["message.created"]}"#)
            )
            let list = members.map { "\"\($0)\"" }.joined(separator: ",")
            _ = try await call("POST", "/v1/groups", #"{"group":"team","owner":"alice","members":[\#(list)]}"#)
            _ = try await call(
                "POST", "/v1/groups/team/changes",
                #"{"by":"alice","action":"setProfile","profile":{"name":"Lunch club","announcement":""}}"#
            )
            let sent = try JSONDecoder().decode(
                SendAck.self,
                from: try await call(
                    "POST", "/v1/conversations/g:team/messages",
                    #"{"from":"alice","clientId":"lunch","body":"Lunch at noon?","needsReadReceipt":true}"#
                )
            ).message
            _ = try await call("POST", "/v1/conversations/g:team/reads", #"{"accounts":["m01","m02","m03"],"seq":\#(sent.seq.rawValue)}"#)
            // A direct conversation m01 has read.
            _ = try await call("POST", "/v1/conversations/d:alice:m01/messages", #"{"from":"alice","clientId":"hi","body":"Hi!"}"#)
            _ = try await call("POST", "/v1/conversations/d:alice:m01/reads", #"{"accounts":["m01"],"seq":1}"#)
            clock.add(2 * 3_600_000, ordering: .relaxed)
            try await Self.waitForFailedDelivery(server, endpoint.id)

            let screenshots =
                ProcessInfo.processInfo.environment["COURIER_CONSOLE_SCREENSHOTS"]
                ?? NSTemporaryDirectory() + "courier-console-" + UUID().uuidString
            let arguments: [String: Any] = [
                "url": server.httpURL.absoluteString, "secret": server.secret.value, "conversation": "g:team",
                "account": "alice", "message": sent.id.rawValue, "endpoint": endpoint.id, "unreadTotal": 21,
                "direct": "d:alice:m01", "directPeer": "m01",
                "screenshots": screenshots,
            ]
            let (status, output) = try await Self.runChecks(arguments)
            #expect(status == 0, "\(output)")
            #expect(output.contains("ok no script errors"), "\(output)")
            // The console's rename is the server's: the profile an SDK would read says it.
            let (_, profile) = try await server.restResponse("GET", "/v1/accounts/alice/profile")
            #expect(try JSONDecoder().decode(AccountProfile.self, from: profile).displayName == "Alice (renamed)")
        }
    }

    /// Waits (up to 30 s) until the endpoint has a failed delivery.
    static func waitForFailedDelivery(_ server: TestServer, _ endpoint: String) async throws {
        struct Deliveries: Decodable { let deliveries: [Delivery] }
        struct Delivery: Decodable { let seq: Int64 }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let (_, data) = try await server.restResponse("GET", "/v1/webhooks/\(endpoint)/deliveries?state=failed")
            if let page = try? JSONDecoder().decode(Deliveries.self, from: data), !page.deliveries.isEmpty { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no delivery failed within 30 s")
    }

    /// Runs the browser checks; their exit status and output.
    static func runChecks(_ arguments: [String: Any]) async throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let json = String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)
        process.arguments = ["python3", tools.appendingPathComponent("console_check.py").path, json]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: output.fileHandleForReading.readDataToEndOfFile()) }
        }
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
