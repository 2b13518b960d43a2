// Courier — Apache-2.0
internal import Foundation
internal import Logging
internal import PostgresNIO

/// Fresh PostgreSQL databases for tests, created on the server named by `COURIER_TEST_POSTGRES_URL`
/// (`.ci/postgres.sh` starts one and prints the URL). Tests that need PostgreSQL are enabled only when it is set.
public enum PostgresTestDatabase {
    /// The server's URL, when the environment provides one.
    public static var serverURL: String? {
        ProcessInfo.processInfo.environment["COURIER_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether PostgreSQL tests can run.
    public static var isAvailable: Bool { serverURL != nil }

    /// Whether the tests that run once per backend run on PostgreSQL too: when it is available, unless
    /// `COURIER_TEST_BACKENDS=sqlite` keeps them to SQLite (the ThreadSanitizer stage of `.ci/run`: the services are the
    /// same on both backends, and the tests of PostgreSQL alone — several nodes, its store's contract — still run).
    public static var runsPerBackendTests: Bool {
        isAvailable && ProcessInfo.processInfo.environment["COURIER_TEST_BACKENDS"] != "sqlite"
    }

    /// Waits (bounded by `attempts` queries) until a backend of the database at `url` is listening for
    /// notifications, i.e. a node's change listener is up. Returns whether one is.
    public static func waitForListener(
        ofDatabaseAt url: String,
        count: Int64 = 1,
        attempts: Int = 5000
    ) async throws -> Bool {
        let database = try databaseName(url)
        return try await withAdminConnection { connection, logger in
            for _ in 0..<attempts {
                let rows = try await connection.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = \(database) AND query LIKE 'LISTEN%'",
                    logger: logger
                )
                if try await rows.decode(Int64.self).first(where: { _ in true }) ?? 0 >= count { return true }
            }
            return false
        }
    }

    /// Ends every backend of the database at `url` that is listening for notifications (as a failing network
    /// would), so that change listeners must reconnect. Returns how many were ended.
    @discardableResult
    public static func terminateListeners(ofDatabaseAt url: String) async throws -> Int {
        let database = try databaseName(url)
        return try await withAdminConnection { connection, logger in
            let rows = try await connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = \(database) AND query LIKE 'LISTEN%'
                """,
                logger: logger
            )
            return try await rows.decode(Bool.self).reduce(0) { $1 ? $0 + 1 : $0 }
        }
    }

    /// Sends `count` change notifications from another node (`origin`) to the database at `url`, in one transaction:
    /// messages at seqs 1…count of `conversation` (each payload distinct, since PostgreSQL folds identical ones).
    public static func notifyChanges(toDatabaseAt url: String, conversation: String, origin: String, count: Int)
        async throws
    {
        let database = try databaseName(url)
        _ = try await withAdminConnection(database: database) { connection, logger in
            try await connection.query(
                """
                SELECT count(pg_notify('courier_changes', json_build_object(
                    'content', json_build_object('entry', json_build_object('_0', \(conversation), 'seq', g)),
                    'origin', \(origin))::text))
                FROM generate_series(1, \(count)) g
                """,
                logger: logger
            )
        }
    }

    private static func databaseName(_ url: String) throws -> String {
        guard let components = URLComponents(string: url) else { throw PostgresTestDatabaseError.notConfigured }
        return components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
    }

    /// Runs `body` with the URL of a fresh, empty database, and drops the database afterwards, whether `body` succeeded
    /// or not (a database is about 8 MB: a run's hundreds of them filled a CI machine's disk). Whatever still holds a
    /// connection to it (a node `body` did not stop) is disconnected by the drop.
    public static func withDatabase<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let url = try await create()
        let result: Result<T, any Error>
        do { result = .success(try await body(url)) } catch { result = .failure(error) }
        try await drop(url)
        return try result.get()
    }

    /// Creates an empty database and returns its URL. Its name carries this process's id: the first call of a process
    /// drops what test processes no longer running left behind (one killed by a timeout, say), when the server runs
    /// on this machine.
    private static func create() async throws -> String {
        guard let serverURL, var components = URLComponents(string: serverURL) else {
            throw PostgresTestDatabaseError.notConfigured
        }
        await sweptOnce.value
        let name =
            "\(prefix)\(getpid())_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        _ = try await withAdminConnection { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        components.path = "/" + name
        return components.string ?? serverURL
    }

    private static let prefix = "courier_test_"

    /// Drops the database at `url`, ending its sessions.
    private static func drop(_ url: String) async throws {
        let name = try databaseName(url)
        _ = try await withAdminConnection { connection, logger in
            try await connection.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                logger: logger
            )
        }
    }

    /// The sweep of databases left by test processes that are gone, run once per process.
    private static let sweptOnce = Task<Void, Never> {
        guard let serverURL, let host = URLComponents(string: serverURL)?.host,
            ["127.0.0.1", "localhost", "::1"].contains(host)
        else { return }
        try? await withAdminConnection { connection, logger in
            let rows = try await connection.query(
                "SELECT datname FROM pg_database WHERE datname LIKE 'courier\\_test\\_%'",
                logger: logger
            )
            var names: [String] = []
            for try await name in rows.decode(String.self) { names.append(name) }
            for name in names {
                // courier_test_<pid>_<hex>; names without a process id are from before this scheme.
                let parts = name.dropFirst(prefix.count).split(separator: "_")
                if parts.count == 2, let pid = pid_t(parts[0]), kill(pid, 0) == 0 || errno != ESRCH { continue }
                _ = try? await connection.query(
                    PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                    logger: logger
                )
            }
        }
    }

    /// Runs `body` with a session of its own on the database at `url`, next to a store's pool: a test holds locks or
    /// a transaction open in it while the store works.
    public static func withSession<T: Sendable>(
        toDatabaseAt url: String,
        _ body: (PostgresSession) async throws -> T
    ) async throws -> T {
        try await withAdminConnection(database: try databaseName(url)) { connection, logger in
            try await body(PostgresSession(connection: connection, logger: logger))
        }
    }

    private static func withAdminConnection<T: Sendable>(
        database: String? = nil,
        _ body: (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        guard let serverURL, let components = URLComponents(string: serverURL), let host = components.host,
            let user = components.user
        else { throw PostgresTestDatabaseError.notConfigured }
        var configuration = PostgresConnection.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: database ?? components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/")).nilIfEmpty,
            tls: .disable
        )
        // The whole suite at once on two cores can keep a loopback connect waiting past PostgresNIO's 10 s (the
        // server's accept queue full while every test opens its pools): the harness waits longer, the servers do not.
        configuration.options.connectTimeout = .seconds(60)
        let logger = Logger(label: "courier.test.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        let result: T
        do {
            result = try await body(connection, logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        return result
    }
}

enum PostgresTestDatabaseError: Error { case notConfigured }

/// A test's own session on a database (``PostgresTestDatabase/withSession(toDatabaseAt:_:)``).
public struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let logger: Logger

    /// Runs one SQL statement, to its end: PostgresNIO hands back a statement's rows before it has finished, so a
    /// statement whose rows are not read may still be running (holding no lock yet) when the test goes on.
    public func execute(_ sql: String) async throws {
        for try await _ in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) {}
    }

    /// The first column of the first row of a query, as an integer.
    public func integer(_ sql: String) async throws -> Int64? {
        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(Int64.self).first { _ in true }
    }

    /// Makes every insert into `message` with the body `body` stop after it wrote its rows, in a trigger that waits for
    /// the advisory lock `key`, which this session takes: the append's transaction commits when ``release(_:)`` is
    /// called. Then runs `append` and returns once it waits there (a state, not a time).
    public func holdingAppends<T: Sendable>(
        withBody body: String,
        key: Int,
        _ append: @escaping @Sendable () async throws -> T
    ) async throws -> Task<T, any Error> {
        try await holdingWrites(on: "message", of: "INSERT", when: "NEW.body = '\(body)'", key: key, append)
    }

    /// ``holdingAppends(withBody:key:_:)`` for any write: every `operations` (`INSERT`, `INSERT OR UPDATE` …) on
    /// `table` whose new row meets `condition` (SQL over `NEW`) waits in a trigger for the advisory lock `key`. Returns
    /// once `write` waits there.
    public func holdingWrites<T: Sendable>(
        on table: String,
        of operations: String,
        when condition: String,
        key: Int,
        _ write: @escaping @Sendable () async throws -> T
    ) async throws -> Task<T, any Error> {
        try await execute(
            """
            CREATE FUNCTION hold_\(key)() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_advisory_xact_lock(\(key)); RETURN NEW; END $$
            """
        )
        try await execute(
            """
            CREATE TRIGGER hold_\(key) AFTER \(operations) ON \(table) FOR EACH ROW WHEN (\(condition))
            EXECUTE FUNCTION hold_\(key)()
            """
        )
        try await execute("SELECT pg_advisory_lock(\(key))")
        let writing = Task { try await write() }
        let deadline = ContinuousClock.now + .seconds(10)
        while try await integer(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = \(key) AND NOT granted"
        ) == 0 {
            guard ContinuousClock.now < deadline else {
                writing.cancel()
                throw PostgresSessionError.neverHeld(key)
            }
            await Task.yield()
        }
        return writing
    }

    /// Lets the appends held by ``holdingAppends(withBody:key:_:)`` go on.
    public func release(_ key: Int) async throws {
        try await execute("SELECT pg_advisory_unlock(\(key))")
    }
}

/// What a session could not do.
public enum PostgresSessionError: Error {
    /// The append never reached the trigger that holds it.
    case neverHeld(Int)
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
