// Courier — Apache-2.0
internal import Foundation

/// A PostgreSQL server of a test's own (initdb in a temporary folder, a free port on 127.0.0.1, trust auth), which
/// the test may crash (`pg_ctl stop -m immediate`: no checkpoint, recovery from the WAL at the next start) and restart
/// without disturbing other tests. It runs with the server-wide defaults a careless deployment could have
/// (`synchronous_commit=off`), so what survives a crash is what Courier's own connections ask for.
public final class PostgresServer: Sendable {
    public let folder: String
    public let port: Int
    private let bin: String

    /// The newest installed PostgreSQL's `bin` folder (Debian: /usr/lib/postgresql/N/bin), if any.
    public static var binFolder: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().last.map { "\(root)/\($0)/bin" }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") ? $0 : nil }
    }

    public static var isAvailable: Bool { binFolder != nil }

    /// Settings given to the server at every start (`-c name=value`, no spaces: `pg_ctl` passes them through a
    /// shell), e.g. `log_statement=all`.
    let settings: [String]

    /// Creates the cluster and starts it.
    public init(port: Int, settings: [String] = []) throws {
        self.settings = settings
        guard let bin = Self.binFolder else { throw HarnessError.serverDidNotStart("PostgreSQL is not installed") }
        self.bin = bin
        self.port = port
        folder = try Self.clusterFolder()
        try run(bin + "/initdb", ["-D", folder, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"])
        try start()
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`: it follows the primary's WAL and takes no writes),
    /// started on `port`. Give the primary `synchronous_standby_names=walreceiver` for a synchronous one: a commit is
    /// acknowledged once this standby has flushed it.
    public init(standbyOf primary: PostgresServer, port: Int, settings: [String] = []) throws {
        self.settings = settings
        self.bin = primary.bin
        self.port = port
        folder = try Self.clusterFolder()
        try run(
            bin + "/pg_basebackup",
            ["-h", "127.0.0.1", "-p", "\(primary.port)", "-U", "postgres", "-D", folder, "-R", "-X", "stream"]
        )
        try start()
    }

    /// A new folder for a cluster, owned by `postgres` when the tests run as root (PostgreSQL refuses to run as root).
    private static func clusterFolder() throws -> String {
        let folder = NSTemporaryDirectory() + "courier-pg-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        if getuid() == 0 {
            try FileManager.default.setAttributes(
                [.ownerAccountName: "postgres", .posixPermissions: 0o700],
                ofItemAtPath: folder
            )
        }
        return folder
    }

    /// Promotes a standby to primary (`pg_ctl promote`, waiting until it takes writes).
    public func promote() throws {
        try run(bin + "/pg_ctl", ["-D", folder, "-w", "-t", "60", "promote"])
    }

    /// Kills the server as a machine failure would: SIGKILL to the postmaster (its processes notice and end; no
    /// checkpoint, no goodbye to the clients).
    public func kill9() throws {
        let pidFile = try String(contentsOfFile: folder + "/postmaster.pid", encoding: .utf8)
        guard let pid = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw HarnessError.refused("no postmaster.pid")
        }
        kill(pid, SIGKILL)
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`
    public var url: String { url(database: "postgres") }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`
    public func url(database: String) -> String { "postgres://postgres@127.0.0.1:\(port)/\(database)" }

    /// Runs one of PostgreSQL's client programs (`createdb`, `pg_dump`, `pg_restore`, …) against this server as
    /// `postgres`: `-h 127.0.0.1 -p PORT -U postgres` come before `arguments`.
    public func tool(_ name: String, _ arguments: [String]) throws {
        let status = try ChildProcess.run(bin + "/" + name, ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres"] + arguments)
        guard status == 0 else { throw HarnessError.refused("\(name) exited with \(status)") }
    }

    /// Starts the server and waits until it accepts connections.
    public func start() throws {
        let options = [
            "-c listen_addresses=127.0.0.1", "-p \(port)", "-k \(folder)", "-c max_connections=200",
            "-c synchronous_commit=off", "-c fsync=off", "-c full_page_writes=off",
        ].joined(separator: " ") + settings.map { " -c \($0)" }.joined()
        try run(bin + "/pg_ctl", ["-D", folder, "-l", folder + "/server.log", "-w", "-t", "60", "-o", options, "start"])
    }

    /// Crashes the server: `pg_ctl stop -m immediate` ends every process at once, without a checkpoint.
    public func crash() throws {
        try run(bin + "/pg_ctl", ["-D", folder, "-m", "immediate", "-w", "stop"])
    }

    /// The server's log (`-l`): what `log_statement` and friends write.
    public var logPath: String { folder + "/server.log" }

    /// Stops the server and removes its folder.
    public func remove() {
        try? run(bin + "/pg_ctl", ["-D", folder, "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func run(_ executable: String, _ arguments: [String]) throws {
        // initdb and the server refuse to run as root: the cluster belongs to the `postgres` user.
        let status =
            getuid() == 0
            ? try ChildProcess.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments)
            : try ChildProcess.run(executable, arguments)
        guard status == 0 else {
            throw HarnessError.refused("\((executable as NSString).lastPathComponent) exited with \(status)")
        }
    }
}
