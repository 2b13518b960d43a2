// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import NIOCore
import Testing

/// The configuration file as an operator uses it: a real `courier-server` started with `--config`, the
/// environment and flags over it, its effect seen on the wire; a bad file stops the server at start, naming the key.
@Suite("Configuration file of a real server", .timeLimit(.minutes(5)))
struct ConfigurationFileTests {
    /// Whether the server refuses a 20-byte body (`message.bodyTooLarge`) rather than looking for its recipient.
    static func refusesTwentyBytes(_ server: ServerProcess) async throws -> Bool {
        try await server.withClient("alice") { client in
            let send = SendRequest(conversation: .direct("alice", "bob"), clientID: "c-1", body: String(repeating: "x", count: 20))
            guard case .error(_, let error) = try await client.request({ .send($0, send) }) else { return false }
            return error.code == .messageBodyTooLarge
        }
    }

    @Test("file, then environment, then flags: each wins over the one before, as the server enforces it")
    func layers() async throws {
        let folder = NSTemporaryDirectory() + "courier-config-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let config = folder + "/courier.json"
        try Data(#"{"max-body-bytes": 16, "recall-window-seconds": 60}"#.utf8).write(to: URL(fileURLWithPath: config))

        let layers: [(arguments: [String], environment: [String: String], refused: Bool)] = [
            (["--config", config], [:], true),
            (["--config", config], ["COURIER_MAX_BODY_BYTES": "4096"], false),
            (["--config", config, "--max-body-bytes", "16"], ["COURIER_MAX_BODY_BYTES": "4096"], true),
            ([], ["COURIER_CONFIG": config], true),
        ]
        for layer in layers {
            let server = try ServerProcess(
                .init(binary: Binaries.courierServer, arguments: layer.arguments, environment: layer.environment),
                secret: Binaries.secret
            )
            defer { server.stop() }
            #expect(try await Self.refusesTwentyBytes(server) == layer.refused, "\(layer.arguments) \(layer.environment)")
            // The node reports the settings it runs with (the console's configuration page), never the secret.
            struct Report: Decodable { struct Setting: Decodable { let name: String; let value: String }; let settings: [Setting] }
            let (status, body) = try await server.rest("GET", "/v1/server/configuration")
            let report = try JSONDecoder().decode(Report.self, from: body)
            let values = Dictionary(report.settings.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
            #expect(status == 200 && values["max-body-bytes"] == (layer.refused ? "16" : "4096"))
            #expect(values["config"] == config && values["recall-window-seconds"] == "60")
            #expect(!String(decoding: body, as: UTF8.self).contains(Binaries.secret))
        }
    }

    @Test("a file with an unknown key or a bad value stops the server at start, naming the key")
    func refusedAtStart() async throws {
        let folder = NSTemporaryDirectory() + "courier-config-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (json, named) in [(#"{"max-body-byte": 16}"#, "max-body-byte"), (#"{"durability": "sometimes"}"#, "--durability")] {
            let config = folder + "/courier.json"
            try Data(json.utf8).write(to: URL(fileURLWithPath: config))
            do {
                let server = try ServerProcess(
                    .init(binary: Binaries.courierServer, arguments: ["--config", config]),
                    secret: Binaries.secret
                )
                server.stop()
                Issue.record("\(json) was accepted")
            } catch HarnessError.serverDidNotStart(let log) {
                #expect(log.contains(named), "\(log)")
            }
        }
    }

    @Test("the report shows the values in force, a mistyped COURIER_ variable is warned about, the version is printed")
    func inForce() async throws {
        let server = try ServerProcess(
            .init(binary: Binaries.courierServer, environment: ["COURIER_MAX_BODY_BYTE": "16"], logLevel: "info"),
            secret: Binaries.secret
        )
        defer { _ = server.stop() }
        struct Report: Decodable { struct Setting: Decodable { let name: String; let value: String }; let settings: [Setting] }
        let (_, body) = try await server.rest("GET", "/v1/server/configuration")
        let values = Dictionary(
            try JSONDecoder().decode(Report.self, from: body).settings.map { ($0.name, $0.value) },
            uniquingKeysWith: { first, _ in first }
        )
        // Started with `--port 0`: the report names the port it listens on, and the connection limit it computed.
        #expect(values["port"] == String(server.port))
        #expect(Int(values["max-connections"] ?? "") ?? 0 > 0)
        let log = try String(contentsOfFile: try #require(server.folder) + "/server.log", encoding: .utf8)
        #expect(log.contains("COURIER_MAX_BODY_BYTE names no setting; it is ignored (did you mean COURIER_MAX_BODY_BYTES?)"))
        #expect(log.contains("Starting courier-server"))
        // A new data folder: its schema was made at this start, and the log says so.
        #expect(log.contains("Database schema migrated") && log.contains("schema.from=new") && log.contains("schema.to=v"))

        let version = Process()
        version.executableURL = URL(fileURLWithPath: Binaries.courierServer)
        version.arguments = ["--version"]
        let output = Pipe()
        version.standardOutput = output
        try version.run()
        version.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        // The build, and the schema it writes on each backend.
        let build = printed.split(separator: " ").first.map(String.init) ?? ""
        #expect(version.terminationStatus == 0 && build.split(separator: ".").count == 3, "\(printed)")
        #expect(printed.contains("(schema: SQLite v") && printed.contains(", PostgreSQL "), "\(printed)")
        let (_, metrics) = try await server.rest("GET", "/metrics")
        let exposition = String(decoding: metrics, as: UTF8.self)
        #expect(exposition.contains("courier_build_info{version=\"\(build)\"} 1"))
        #expect(exposition.contains("# HELP courier_connections "))
    }

    @Test("the connections are served by one event loop per core, less the one SQLite's writer keeps busy; --event-loops sets it")
    func eventLoops() async throws {
        let cores = System.coreCount
        // NIO's own variable is overruled, and the log says so.
        let nio = ["NIO_SINGLETON_GROUP_LOOP_COUNT": "4"]
        for (arguments, environment, loops) in [([String](), [:], max(1, cores - 1)), (["--event-loops", "3"], nio, 3)] {
            let server = try ServerProcess(
                .init(binary: Binaries.courierServer, arguments: arguments, environment: environment),
                secret: Binaries.secret
            )
            defer { server.stop() }
            // The threads the process runs, by name (NIO names its shared loops `NIO-SGLTN-<group>-#<n>`).
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/task")
            let names = tasks.compactMap { try? String(contentsOfFile: "/proc/\(server.pid)/task/\($0)/comm", encoding: .utf8) }
            #expect(names.filter { $0.hasPrefix("NIO-SGLTN-") }.count == loops, "\(arguments): \(names.sorted())")
            #expect(names.contains { $0.hasPrefix("courier-writer") }, "\(names.sorted())")
            struct Report: Decodable { struct Setting: Decodable { let name: String; let value: String }; let settings: [Setting] }
            let (_, body) = try await server.rest("GET", "/v1/server/configuration")
            let report = try JSONDecoder().decode(Report.self, from: body)
            #expect(report.settings.first { $0.name == "event-loops" }?.value == "\(loops) (\(cores) cores)")
            // Served on them: a request and its answer.
            #expect(try await Self.refusesTwentyBytes(server) == false)
            let log = try String(contentsOfFile: try #require(server.folder) + "/server.log", encoding: .utf8)
            let warned = log.contains("NIO_SINGLETON_GROUP_LOOP_COUNT is ignored: the server runs 3 event loops")
            #expect(warned == !environment.isEmpty, "\(log.suffix(500))")
        }
    }

    @Test("courier-server token in a folder without the server's secret refuses, creating nothing")
    func tokenWithoutSecret() async throws {
        let folder = NSTemporaryDirectory() + "courier-token-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let token = Process()
        token.executableURL = URL(fileURLWithPath: Binaries.courierServer)
        token.arguments = ["token", "alice"]
        token.currentDirectoryURL = URL(fileURLWithPath: folder)
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_APP_SECRET"] = nil
        environment["COURIER_DATA_DIR"] = nil
        token.environment = environment
        let errors = Pipe()
        token.standardError = errors
        token.standardOutput = FileHandle.nullDevice
        try token.run()
        token.waitUntilExit()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(token.terminationStatus != 0)
        #expect(said.contains("No app secret at ./courier-data/app-secret"), "\(said)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }
}
