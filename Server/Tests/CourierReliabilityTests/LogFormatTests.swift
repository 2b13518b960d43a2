// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `--log-format json`, checked on the real server's standard error: every line is one JSON object with a
/// time, a level and a message; WebSocket and REST requests carry request ids; no line holds a token, the app secret
/// or a message body.
@Suite("JSON logs of a real server", .timeLimit(.minutes(5)))
struct LogFormatTests {
    @Test("every line is JSON with request ids, and never a token, the secret or a body")
    func jsonLines() async throws {
        let folder = NSTemporaryDirectory() + "courier-logs-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServerProcess(
            .init(
                binary: Binaries.courierServer,
                arguments: ["--log-format", "json"],
                folder: folder,
                logLevel: "debug"
            ),
            secret: Binaries.secret
        )
        let body = "a body that must never be logged 7f3a"
        let token = try await Binaries.token(for: "alice")
        do {
            try await server.withClient("alice") { client in
                let send = SendRequest(conversation: .direct("alice", "bob"), clientID: "log-1", body: body)
                _ = try await client.request { .send($0, send) }  // bob is unknown: refused, and logged as such
                _ = try await client.request { .sync($0, SyncRequest(cursors: [:])) }
                _ = try await client.request { .ping($0) }
            }
            var request = URLRequest(url: URL(string: server.httpURL + "/metrics")!)
            request.setValue("Bearer \(Binaries.secret)", forHTTPHeaderField: "Authorization")
            _ = try await URLSession.shared.data(for: request)
        } catch {
            server.stop()
            throw error
        }
        #expect(server.stop() == 0)

        let log = try String(contentsOfFile: folder + "/server.log", encoding: .utf8)
        let lines = log.split(separator: "\n")
        #expect(lines.count >= 3)
        var objects: [[String: Any]] = []
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "not a JSON object: \(line)")
            if let object { objects.append(object) }
        }
        #expect(objects.allSatisfy { $0["time"] is String && $0["level"] is String && $0["message"] is String })
        let answered = objects.filter { $0["message"] as? String == "Request answered" }
        #expect(answered.contains { $0["courier.request.type"] as? String == "send" && $0["courier.request.id"] != nil })
        #expect(answered.contains { $0["courier.outcome"] as? String == "account.notFound" })
        // Every request has its line, ping included (operations.md).
        #expect(answered.contains { $0["courier.request.type"] as? String == "ping" && $0["courier.outcome"] as? String == "ack" })
        #expect(objects.contains { $0["hb.request.id"] != nil && $0["hb.request.path"] as? String == "/metrics" })
        for secret in [token, Binaries.secret, body] { #expect(!log.contains(secret)) }
    }

    @Test("the log level changes while the server runs: REST lines appear at info, and stop again at warning")
    func runtimeLevel() async throws {
        let folder = NSTemporaryDirectory() + "courier-level-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServerProcess(
            .init(binary: Binaries.courierServer, arguments: ["--log-format", "json"], folder: folder, logLevel: "warning"),
            secret: Binaries.secret
        )
        defer { _ = server.stop() }
        func requestLines() throws -> [String] {
            try String(contentsOfFile: folder + "/server.log", encoding: .utf8).split(separator: "\n")
                .filter { $0.contains(#""message":"Request""#) }.map { String($0) }
        }
        _ = try await server.rest("GET", "/v1/accounts/quiet-1")
        #expect(try await server.rest("GET", "/v1/server/log-level").body == Data(#"{"level":"warning"}"#.utf8))
        #expect(try await server.rest("PUT", "/v1/server/log-level", json: Data(#"{"level":"info"}"#.utf8)).status == 200)
        _ = try await server.rest("GET", "/v1/accounts/loud-1")
        #expect(try await server.rest("PUT", "/v1/server/log-level", json: Data(#"{"level":"warning"}"#.utf8)).status == 200)
        _ = try await server.rest("GET", "/v1/accounts/quiet-2")
        #expect(try await server.rest("PUT", "/v1/server/log-level", json: Data(#"{"level":"loud"}"#.utf8)).status == 400)
        // Written before each answer: the lines are in the file by now.
        let paths = try requestLines().compactMap { line in
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["hb.request.path"] as? String
        }
        #expect(paths.contains("/v1/accounts/loud-1"))
        #expect(!paths.contains("/v1/accounts/quiet-1") && !paths.contains("/v1/accounts/quiet-2"), "\(paths)")

        // At info again, SIGTERM: the log says when the drain began and how long it took.
        #expect(try await server.rest("PUT", "/v1/server/log-level", json: Data(#"{"level":"info"}"#.utf8)).status == 200)
        #expect(server.stop() == 0)
        let log = try String(contentsOfFile: folder + "/server.log", encoding: .utf8)
        #expect(log.contains("Draining: no new connections") && log.contains(#""message":"Drained""#), "\(log.suffix(600))")
    }
}
