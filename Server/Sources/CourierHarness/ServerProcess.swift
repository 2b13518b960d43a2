// Courier — Apache-2.0
import Foundation
import GRDB

/// The server under test: a `courier-server` child process on 127.0.0.1 with a fresh data folder (stopped at the
/// end), or an already running one given by URL and pid.
final class ServerProcess: @unchecked Sendable {
    // @unchecked: `process` and `folder` are set once in init and only read afterwards.
    let url: String
    let pid: Int32
    let secret: String
    private let process: Process?
    private let folder: String?

    /// Starts `binary` with a fresh data folder and waits for its "listening" line.
    init(binary: String, postgresURL: String?, secret: String) throws {
        let folder = NSTemporaryDirectory() + "courier-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--port", "0", "--data-dir", folder, "--log-level", "warning"]
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_APP_SECRET"] = secret
        if let postgresURL { environment["COURIER_POSTGRES_URL"] = postgresURL }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        guard let line = Self.readLine(output.fileHandleForReading, containing: "listening on ws://"),
            let range = line.range(of: "ws://"), let end = line[range.lowerBound...].firstIndex(of: " ")
        else {
            process.terminate()
            throw BenchError.serverDidNotStart("no listening line from \(binary)")
        }
        self.url = String(line[range.lowerBound..<end])
        self.pid = process.processIdentifier
        self.secret = secret
        self.process = process
        self.folder = folder
    }

    /// A server someone else runs.
    init(url: String, pid: Int32, secret: String) {
        self.url = url
        self.pid = pid
        self.secret = secret
        self.process = nil
        self.folder = nil
    }

    /// Stops the server if this benchmark started it, and removes its data folder.
    func stop() {
        guard let process else { return }
        process.terminate()
        process.waitUntilExit()
        if let folder { try? FileManager.default.removeItem(atPath: folder) }
    }

    /// The HTTP base URL (REST API) of the same server.
    var httpURL: String {
        let rest = url.replacingOccurrences(of: "ws://", with: "http://")
        guard let scheme = rest.range(of: "://"), let slash = rest[scheme.upperBound...].firstIndex(of: "/") else {
            return rest
        }
        return String(rest[..<slash])
    }

    /// The bytes the SQLite database uses (bytes in use in its pages, WAL included, free space not), read through a read-only
    /// connection; `nil` for a server this benchmark did not start or one on PostgreSQL.
    var databaseBytes: Int64? {
        guard let folder else { return nil }
        let path = folder + "/courier.sqlite"
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var configuration = Configuration()
        configuration.readonly = true
        guard let database = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        return try? database.read { db in
            // Bytes in use inside pages (dbstat), where SQLite has it; whole pages otherwise.
            if let used = try? Int64.fetchOne(db, sql: "SELECT sum(pgsize - unused) FROM dbstat") { return used }
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return (pages - free) * size
        }
    }

    /// Bytes of the data folder (database and WAL), for storage-per-message figures.
    var dataBytes: Int64 {
        guard let folder, let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        return names.reduce(0) { total, name in
            let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            return total + ((attributes?[.size] as? NSNumber)?.int64Value ?? 0)
        }
    }

    /// User + system CPU seconds of the server process so far (from /proc/PID/stat).
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, utime 14 and stime 15 (1-based) → indexes 11 and 12 here.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory of the server process in KiB (VmRSS from /proc/PID/status).
    var rssKiB: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    private static func readLine(_ handle: FileHandle, containing marker: String) -> String? {
        var buffer = Data()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
            let text = String(decoding: buffer, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
        }
        return nil
    }
}
