// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Failed webhook attempts are logged, with the endpoint, the event and the status, and a bounded number a
/// minute: an endpoint that is down costs the log a few lines, not one per event. Read from the log file of a real
/// server process.
@Suite("Webhook failures in the log", .timeLimit(.minutes(5)))
struct WebhookFailureLogTests {
    struct Created: Decodable { let id: String; let secret: String }
    struct Deliveries: Decodable { let deliveries: [Delivery] }
    struct Delivery: Decodable { let attempts: Int; let lastStatus: Int? }

    @Test("an endpoint answering 503: its failed attempts are logged with endpoint, event and status, at most six lines a minute")
    func failuresLogged() async throws {
        let server = try ServerProcess(
            .init(binary: Binaries.courierServer, arguments: ["--webhook-allow-private", "true"], logLevel: "info"),
            secret: Binaries.secret
        )
        defer { _ = server.stop() }
        let recipients = (1...12).map { AccountID(rawValue: "r\($0)") }
        try await server.register(["alice"] + recipients)
        let port = try await freePort()
        let path = WebhookReceiver.uniquePath()
        let (status, body) = try await server.rest(
            "POST", "/v1/webhooks",
            json: Data(#"{"url":"http://127.0.0.1:\#(port)\#(path)","events":["message.created"]}"#.utf8)
        )
        #expect(status == 201)
        let endpoint = try JSONDecoder().decode(Created.self, from: body)
        let receiver = try await WebhookReceiver(port: port, path: path, secrets: [endpoint.secret], failStatus: 503)
        defer { receiver.stop() }
        // One message into each of twelve conversations: twelve first attempts, each refused.
        for recipient in recipients {
            let conversation = ConversationID.direct("alice", recipient)
            let (sent, _) = try await server.rest(
                "POST", "/v1/conversations/\(conversation)/messages",
                json: Data(#"{"from":"alice","clientId":"\#(recipient)","body":"hi"}"#.utf8)
            )
            #expect(sent == 200)
        }
        let refused = await receiver.collect { $0.filter { $0.status == 503 }.count >= recipients.count }
        #expect(refused.count >= recipients.count)
        // Each refusal is recorded (attempts and status) before the log is read.
        var recorded = 0
        while recorded < recipients.count {
            let (listed, page) = try await server.rest("GET", "/v1/webhooks/\(endpoint.id)/deliveries?limit=100")
            #expect(listed == 200)
            recorded = try JSONDecoder().decode(Deliveries.self, from: page).deliveries
                .filter { $0.attempts >= 1 && $0.lastStatus == 503 }.count
        }

        let log = try String(contentsOfFile: server.folder! + "/server.log", encoding: .utf8).split(separator: "\n")
        let failed = log.filter { $0.contains("Webhook attempt failed") }
        let quiet = log.filter { $0.contains("Webhook attempts keep failing") }
        #expect(!failed.isEmpty)
        #expect(
            failed.allSatisfy { $0.contains("webhook.endpoint=\(endpoint.id)") && $0.contains("http.status=503") },
            "\(failed.first ?? "")"
        )
        #expect(failed.allSatisfy { $0.contains("webhook.event=evt_") && $0.contains("webhook.type=message.created") })
        // Twelve refusals, within a minute or across one minute's turn: five lines a minute and one saying so.
        #expect(failed.count <= 10 && quiet.count <= 2, "\(failed.count) failure lines, \(quiet.count) quiet lines")
        #expect(quiet.count >= 1)
    }
}
