// Courier — Apache-2.0
internal import Foundation
internal import GRDB

/// A `courier-server` child process on 127.0.0.1, seen as an operator sees it: started with flags and environment,
/// stopped with SIGTERM or killed with SIGKILL, measured through `/proc`. Used by `courier-bench` and by the tests
/// that check promises from outside the process (durability, crashes, memory bounds).
public final class ServerProcess: Sendable {
    /// `ws://127.0.0.1:PORT/v1/ws`
    public let url: String
    /// The server's pid (under a wrapper such as strace, the wrapper's child).
    public let pid: Int32
    public let secret: String
    /// The data folder (SQLite database and WAL), when this process was started here.
    public let folder: String?
    private let process: ChildProcess?
    private let ownsFolder: Bool

    /// How to start a server.
    public struct Launch: Sendable {
        public var binary: String
        /// Extra `serve` flags (`--durability normal`, …).
        public var arguments: [String]
        public var environment: [String: String]
        /// The data folder; a fresh temporary one (removed by ``stop()``) when `nil`.
        public var folder: String?
        /// 0 picks a free port.
        public var port: Int
        /// A command the server runs under (`["strace", "-f", …]`); the server's own arguments follow it.
        public var wrapper: [String]
        /// `--log-level`.
        public var logLevel: String
        /// Where its standard error goes; `server.log` in the data folder when `nil`.
        public var logFile: String?

        public init(
            binary: String,
            arguments: [String] = [],
            environment: [String: String] = [:],
            folder: String? = nil,
            port: Int = 0,
            wrapper: [String] = [],
            logLevel: String = "warning",
            logFile: String? = nil
        ) {
            self.binary = binary
            self.arguments = arguments
            self.environment = environment
            self.folder = folder
            self.port = port
            self.wrapper = wrapper
            self.logLevel = logLevel
            self.logFile = logFile
        }
    }

    /// Starts a server and waits for its "listening" line (its standard error goes to `server.log` in the data
    /// folder).
    public init(_ launch: Launch, secret: String) throws {
        let ownsFolder = launch.folder == nil
        let folder = launch.folder ?? (NSTemporaryDirectory() + "courier-process-" + UUID().uuidString)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let serve =
            [launch.binary, "serve", "--port", String(launch.port), "--data-dir", folder, "--log-level", launch.logLevel]
            + launch.arguments
        let command = launch.wrapper + serve
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_APP_SECRET"] = secret
        // 60 s to authenticate, not 10: a test process starved on two busy cores took longer between the upgrade and
        // its connect (a launch's environment may set another).
        environment["COURIER_AUTH_TIMEOUT_SECONDS"] = "60"
        // No rate limits: the workloads drive devices far past a person's pace (a launch may set them).
        for name in Self.rateLimitVariables { environment[name] = "0" }
        for (key, value) in launch.environment { environment[key] = value }
        let process = try ChildProcess(
            Self.which(command[0]),
            Array(command.dropFirst()),
            environment: environment,
            captureOutput: true,
            errorFile: launch.logFile ?? folder + "/server.log"
        )
        guard let line = process.readLine(containing: "listening on ws://"),
            let range = line.range(of: "ws://"), let end = line[range.lowerBound...].firstIndex(of: " ")
        else {
            process.signal(SIGKILL)
            process.wait()
            let log = (try? String(contentsOfFile: launch.logFile ?? folder + "/server.log", encoding: .utf8)) ?? ""
            throw HarnessError.serverDidNotStart(
                "no listening line from \(launch.binary); its log ends with: \(log.suffix(1500))"
            )
        }
        self.url = String(line[range.lowerBound..<end])
        self.pid = launch.wrapper.isEmpty ? process.pid : Self.child(of: process.pid)
        self.secret = secret
        self.process = process
        self.folder = folder
        self.ownsFolder = ownsFolder
    }

    /// The environment variables of the server's rate limits (`--device-sends-per-second` and the others).
    public static let rateLimitVariables = [
        "COURIER_DEVICE_SENDS_PER_SECOND", "COURIER_DEVICE_WRITES_PER_SECOND", "COURIER_ACCOUNT_SENDS_PER_SECOND",
        "COURIER_REST_REQUESTS_PER_SECOND", "COURIER_DEVICE_TYPING_PER_SECOND",
    ]

    /// A server someone else runs.
    public init(url: String, pid: Int32, secret: String) {
        self.url = url
        self.pid = pid
        self.secret = secret
        self.process = nil
        self.folder = nil
        self.ownsFolder = false
    }

    /// The port it listens on.
    public var port: Int { Int(url.split(separator: ":").last?.split(separator: "/").first ?? "") ?? 0 }

    /// Stops the server gracefully (SIGTERM) if this harness started it, waits for it, and removes a temporary data
    /// folder. Returns the exit status.
    @discardableResult
    public func stop() -> Int32 {
        guard let process else { return 0 }
        // The server itself gets the signal: a wrapper such as strace blocks SIGTERM and ends with its child.
        _ = Foundation.kill(pid, SIGTERM)
        let status = process.wait()
        if ownsFolder, let folder { try? FileManager.default.removeItem(atPath: folder) }
        return status
    }

    /// Waits, off the caller's thread, for the process to end by itself (after a signal the test sent, say); its exit
    /// status.
    public func exited() async -> Int32 {
        guard let process else { return 0 }
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: process.wait()) }
        }
    }

    /// Kills the server with SIGKILL (no chance to flush or close anything) and waits until it is gone.
    public func kill() {
        guard let process else { return }
        _ = Foundation.kill(pid, SIGKILL)
        process.wait()
    }

    /// Whether the server process still runs (exists and is not a zombie).
    public var isAlive: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    /// The HTTP base URL (REST API) of the same server.
    public var httpURL: String {
        let rest = url.replacingOccurrences(of: "ws://", with: "http://")
        guard let scheme = rest.range(of: "://"), let slash = rest[scheme.upperBound...].firstIndex(of: "/") else {
            return rest
        }
        return String(rest[..<slash])
    }

    /// The bytes the SQLite database uses (bytes in use in its pages, WAL included, free space not), read through a
    /// read-only connection; `nil` for a server this harness did not start or one on PostgreSQL.
    public var databaseBytes: Int64? {
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
    public var dataBytes: Int64 {
        guard let folder, let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        return names.reduce(0) { total, name in
            let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            return total + ((attributes?[.size] as? NSNumber)?.int64Value ?? 0)
        }
    }

    /// User + system CPU seconds of the server process so far (from /proc/PID/stat).
    public var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, utime 14 and stime 15 (1-based) → indexes 11 and 12 here.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Context switches of the server process so far: voluntary and involuntary, summed over all its threads (from
    /// /proc/PID/task/*/status). Each is a thread that slept and was woken, or was preempted: at light load, the
    /// count per request is the number of times the request path wakes a thread. Threads that ended since
    /// an earlier reading are no longer counted, so take both readings while the server runs steadily.
    public var contextSwitches: Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var total = 0
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else {
                continue
            }
            for line in status.split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                total += Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        return total
    }

    /// Resident memory of the server process in KiB (VmRSS from /proc/PID/status).
    public var rssKiB: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Open file descriptors of the server process (entries of /proc/PID/fd).
    public var openDescriptors: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// The first child of `parent` (the server a wrapper started), from /proc.
    private static func child(of parent: Int32) -> Int32 {
        let children = try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8)
        return children?.split(separator: " ").first.flatMap { Int32($0) } ?? parent
    }

    private static func which(_ command: String) -> String {
        if command.contains("/") { return command }
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/\(command)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "/usr/bin/\(command)"
    }
}
/// What went wrong between a harness client and a server.
public enum HarnessError: Error, CustomStringConvertible {
    case refused(String)
    case closed
    case serverDidNotStart(String)
    case timedOut(String)

    public var description: String {
        switch self {
        case .refused(let detail): "The server refused a request: \(detail)"
        case .closed: "The connection closed."
        case .serverDidNotStart(let detail): "The server did not start: \(detail)"
        case .timedOut(let what): "Timed out: \(what)"
        }
    }
}
