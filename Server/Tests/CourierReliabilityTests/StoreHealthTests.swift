// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Readiness that tells the truth, checked from outside a real server whose data folder is a small tmpfs the
/// test mounts: a full disk and a read-only file system turn `/health/ready` to 503 while the REST sends fail with 500
/// `internal`, each failure is in the log with its cause and the request id the answer carried, and both recover by
/// themselves once the disk is fixed. Needs root (CI runs as root) for `mount`.
@Suite("Store health of a real server", .serialized, .timeLimit(.minutes(5)), .enabled(if: TmpfsMount.permitted))
struct StoreHealthTests {

    /// A 16 MiB tmpfs at a new folder (unmounted by `body`'s end) for the data, and the server's log on the normal
    /// disk beside it (a full or read-only data folder could not take the log).
    func withSmallDisk(_ body: (_ disk: String, _ log: String) async throws -> Void) async throws {
        let folder = NSTemporaryDirectory() + "courier-disk-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try run("/bin/mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", folder)
        defer {
            _ = try? run("/bin/umount", "-l", folder)
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: folder + ".log")
        }
        try await body(folder, folder + ".log")
    }

    @discardableResult
    func run(_ executable: String, _ arguments: String...) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice  // dd's "No space left on device" is the point
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError.refused("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return process.terminationStatus
    }

    func send(_ server: ServerProcess, _ clientID: String) async throws -> RESTAnswer {
        let body = #"{"from":"alice","clientId":"\#(clientID)","type":"text","body":"\#(String(repeating: "x", count: 2000))"}"#
        return try await server.call("POST", "/v1/conversations/\(ConversationID.direct("alice", "bob"))/messages", json: body)
    }

    func historyCount(_ server: ServerProcess) async throws -> Int {
        let answer = try await server.call(
            "GET",
            "/v1/conversations/\(ConversationID.direct("alice", "bob"))/messages?account=bob&limit=1000"
        )
        #expect(answer.status == 200)
        let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
        return (object?["messages"] as? [Any])?.count ?? -1
    }

    /// The JSON lines of a server's log.
    func logLines(_ log: String) throws -> [[String: Any]] {
        try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("a full disk: ready 503 and sends 500 with their cause logged; freeing space makes it ready again")
    func fullDisk() async throws {
        try await withSmallDisk { disk, log in
            let server = try ServerProcess(
                .init(binary: Binaries.courierServer, arguments: ["--log-format", "json"], folder: disk + "/data", logLevel: "info", logFile: log),
                secret: Binaries.secret
            )
            defer { _ = server.stop() }
            try await server.register(["alice", "bob"])
            let first = try await send(server, "before-1")
            #expect(first.status == 200 && first.requestID?.isEmpty == false)
            let ready = try await server.call("GET", "/health/ready")
            #expect(ready.status == 200 && ready.requestID?.isEmpty == false)

            // Fill the disk: `dd` stops when nothing more fits.
            let filler = disk + "/filler"
            _ = try? run("/bin/dd", "if=/dev/zero", "of=\(filler)", "bs=64k", "status=none")

            // Sends fail once the log cannot grow (what was already allocated may take a few).
            var failed: RESTAnswer?
            for index in 0..<200 {
                let answer = try await send(server, "full-\(index)")
                if answer.status != 200 {
                    failed = answer
                    break
                }
            }
            let failure = try #require(failed, "no send failed on a full disk")
            #expect(failure.status == 500 && failure.code == "internal")
            let failureID = try #require(failure.requestID)
            let notReady = try await server.call("GET", "/health/ready")
            #expect(notReady.status == 503)
            #expect(String(decoding: notReady.body, as: UTF8.self).contains(#""store":"unavailable""#))
            #expect(try await server.call("HEAD", "/health/ready").status == 503)
            #expect(try await server.call("GET", "/health/live").status == 200)
            let stored = try await historyCount(server)

            // The 500 is in the log, at error, with its request id, its route and SQLite's own words for the cause.
            let lines = try logLines(log)
            let logged = lines.first { $0["hb.request.id"] as? String == failureID && $0["level"] as? String == "error" }
            #expect(logged?["http.route"] as? String == "/v1/conversations/{conversation}/messages")
            #expect((logged?["error"] as? String)?.contains("full") == true, "\(String(describing: logged))")
            #expect(logged?["http.response.status_code"] as? Int == 500)
            #expect(lines.contains { $0["message"] as? String == "Not ready" && $0["level"] as? String == "warning" })

            // Space again: ready at the next probe, sends stored; nothing of the failed ones was.
            try FileManager.default.removeItem(atPath: filler)
            #expect(try await server.call("GET", "/health/ready").status == 200)
            #expect(try await send(server, "after-1").status == 200)
            #expect(try await historyCount(server) == stored + 1)
            #expect(try logLines(log).contains { $0["message"] as? String == "Ready: the store commits and the change feed listens" })
        }
    }

    @Test("a database on a read-only file system: the server refuses to start and says why")
    func readOnly() async throws {
        try await withSmallDisk { disk, log in
            let launch = ServerProcess.Launch(
                binary: Binaries.courierServer,
                folder: disk + "/data",
                logLevel: "info",
                logFile: log
            )
            let server = try ServerProcess(launch, secret: Binaries.secret)
            try await server.register(["alice", "bob"])
            #expect(server.stop() == 0)

            // A restored volume mounted read-only, say: SQLite would open the file read-only and fail every write.
            try run("/bin/mount", "-o", "remount,ro", disk)
            #expect(throws: HarnessError.self) { try ServerProcess(launch, secret: Binaries.secret) }
            let said = try String(contentsOfFile: log, encoding: .utf8)
            #expect(said.contains("cannot be written (a read-only file or file system)"), "\(said.suffix(600))")

            // Writable again: it starts, with what it had.
            try run("/bin/mount", "-o", "remount,rw", disk)
            let again = try ServerProcess(launch, secret: Binaries.secret)
            defer { _ = again.stop() }
            #expect(try await again.call("GET", "/health/ready").status == 200)
            #expect(try await send(again, "after-1").status == 200)
        }
    }
}

/// Whether this process may mount a tmpfs (root with the capability: CI's machines, this project's workplace). A
/// machine where it may not skips the suite rather than fail on the test's own set-up.
enum TmpfsMount {
    static let permitted: Bool = {
        let folder = NSTemporaryDirectory() + "courier-can-mount-" + UUID().uuidString
        guard (try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)) != nil else {
            return false
        }
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func run(_ arguments: [String]) -> Bool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return false }
            process.waitUntilExit()
            return process.terminationStatus == 0
        }
        guard run(["/bin/mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", folder]) else { return false }
        return run(["/bin/umount", folder])
    }()
}
