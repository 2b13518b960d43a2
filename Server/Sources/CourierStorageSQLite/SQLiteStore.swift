// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import GRDB
internal import Foundation

/// The embedded default store: one SQLite file in WAL mode, `synchronous=FULL` unless told otherwise.
///
/// All writes go through GRDB's single writer connection, so each operation is one serialized transaction; the
/// invariants (gapless seq, idempotent send, forward-only watermarks) are also enforced in SQL.
public struct SQLiteStore: Sendable {
    /// Where the database lives.
    public enum Location: Sendable, Hashable {
        /// A file (created with its folder's permission if missing).
        case file(String)
        /// A private in-memory database, for tests.
        case inMemory
    }

    /// How hard a commit waits for the disk.
    public enum Durability: String, Sendable, Hashable, CaseIterable {
        /// `synchronous=FULL`: an acknowledged message survives power loss. The default.
        case full
        /// `synchronous=NORMAL`: faster; in WAL mode a power loss may drop the last commits (never corrupts).
        case normal
    }

    let writer: any DatabaseWriter
    let groupCommit: GroupCommit
    /// Reads of one reader in one conversation waiting for the same commit, written as one (ADR 0037).
    let pendingReads = PendingReads()
    /// Told of every group commit: its batch size and latency (`courier_commit_*` metrics).
    public let commits = CommitObserver()
    /// Purges the WAL after recalls (file databases only: an in-memory one has no WAL).
    let walPurge: WALPurge?

    /// The thread its writes run on; the server runs the requests that write there too (ADR 0037).
    public var requestExecutor: (any TaskExecutor)? { groupCommit.thread }
    /// The schema this build migrates to (`courier-server --version`).
    public static var schemaVersion: String { Schema.migrations.last?.name ?? "none" }
    /// The migrations this open ran: the schema it found (`nil`: a new database) and the one it left; `nil` when
    /// there was nothing to do. Logged at start.
    public private(set) var migrated: (from: String?, to: String)?

    /// Opens (creating if needed) the database and runs the migrations.
    public init(location: Location, durability: Durability = .full) throws {
        let clock = ChangeClock()
        let readerPath: String?
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(Double(Self.busyTimeoutMilliseconds) / 1000)
        configuration.prepareDatabase { db in
            try Self.applyPragmas(db, durability: durability)
            db.add(function: clock.function)
        }
        switch location {
        case .file(let path):
            // SQLite writes beside the file too (its `-wal` and `-shm`): both must be writable.
            let folder = (path as NSString).deletingLastPathComponent
            for place in [path, folder.isEmpty ? "." : folder] where FileManager.default.fileExists(atPath: place) {
                guard FileManager.default.isWritableFile(atPath: place) else {
                    throw StorageError.failed(
                        "The database cannot be written (a read-only file or file system): \(place) is not writable"
                    )
                }
            }
            readerPath = path
            let pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB switches the writer to `synchronous=NORMAL` when it turns WAL on, after `prepareDatabase` ran
            // (GRDB `Database.setUpWALMode`), so the setting is applied again on the connection that writes, and
            // checked there: every acknowledged commit waits for its fsync (SPEC §9.1).
            try pool.barrierWriteWithoutTransaction { db in
                try Self.applyPragmas(db, durability: durability)
                try Self.checkPragmas(db, durability: durability, wal: true)
            }
            writer = pool
            // Checkpoints get a connection of their own that never waits for a lock (see WALPurge).
            var checkpointing = configuration
            checkpointing.busyMode = .immediateError
            let checkpointer = try DatabaseQueue(path: path, configuration: checkpointing)
            walPurge = WALPurge(checkpointer: checkpointer)
        case .inMemory:
            writer = try DatabaseQueue(configuration: configuration)
            walPurge = nil
            readerPath = nil
        }
        // A database a newer build migrated is refused rather than run with a schema this build does not know (a
        // renamed table would fail at the first request that reads it): downgrading is restoring the backup taken
        // before the upgrade (docs/operations.md).
        let migrator = Self.migrator
        let found = try writer.read { db in try migrator.appliedIdentifiers(db) }
        let unknown = found.subtracting(migrator.migrations)
        guard unknown.isEmpty else {
            throw StorageError.newerSchema(
                found: unknown.sorted().joined(separator: ", "), known: migrator.migrations.last ?? "none"
            )
        }
        try migrator.migrate(writer)
        if found.count < migrator.migrations.count {
            migrated = (Schema.migrations.last { found.contains($0.name) }?.name, Self.schemaVersion)
        }
        // A database that opened read-only (its file or folder cannot be written: a read-only volume, a restored file's
        // permissions) would serve reads and fail every write behind a live process: refuse to start instead. Other
        // failures of this first write (a full disk) are left to readiness, which reports them until they pass.
        do {
            try writer.write { db in try db.execute(sql: "UPDATE health_probe SET probes = probes + 1") }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_READONLY {
            throw StorageError.failed("The database cannot be written (a read-only file or file system): \(error)")
        } catch {}
        clock.load(committed: try writer.read { db in try Int64.fetchOne(db, sql: "SELECT value FROM change_clock") ?? 0 })
        // The store's thread's own reading connection (file databases only; ADR 0062). Only that thread uses it, and
        // only that thread commits what its reads see, so no commit can come between the statements of a read it runs:
        // the reads need no transaction, and no reader of the pool (its lock, its queue, `BEGIN` and `COMMIT`). Opened
        // once the schema is migrated: its statements are prepared against the schema in force.
        let threadReader = try readerPath.map { path in
            var reading = configuration
            reading.readonly = true
            return try DatabaseQueue(path: path, configuration: reading)
        }
        groupCommit = GroupCommit(writer: writer, commits: commits, clock: clock, threadReader: threadReader)
        // A purge owed when the last process stopped (or was killed) is tried now; when another process reads the
        // file (a backup, say), it stays owed and the backend's service retries it.
        if let walPurge, (try? walPurge.truncateNow()) != true { walPurge.owe() }
    }

    /// The settings in force on the connection that writes (the one whose commits are acknowledged), e.g.
    /// `("wal", 2, true)`; for tests and diagnostics.
    public func writerPragmas() async throws -> (journalMode: String, synchronous: Int, secureDelete: Bool) {
        try await writer.writeWithoutTransaction { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
                try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                try Bool.fetchOne(db, sql: "PRAGMA secure_delete") ?? false
            )
        }
    }

    /// How long a write waits for another process's write lock (a backup, the `sqlite3` shell) before failing.
    static let busyTimeoutMilliseconds = 10_000

    /// Pragmas every connection gets. `synchronous` decides durability (FULL = 2: a commit returns once the WAL is
    /// synced); `secure_delete` zeroes freed space, so a recalled body leaves no trace in the file; `foreign_keys` is
    /// GRDB's `foreignKeysEnabled`.
    static func applyPragmas(_ db: Database, durability: Durability) throws {
        try db.execute(sql: "PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
        try db.execute(sql: "PRAGMA secure_delete = ON")
    }

    /// Refuses to open when a pragma did not take on the writing connection (a library or build that overrides it).
    static func checkPragmas(_ db: Database, durability: Durability, wal: Bool) throws {
        let synchronous = try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
        let secureDelete = try Int.fetchOne(db, sql: "PRAGMA secure_delete") ?? 0
        let foreignKeys = try Int.fetchOne(db, sql: "PRAGMA foreign_keys") ?? 0
        let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? ""
        let expected = durability == .full ? 2 : 1
        guard synchronous == expected, secureDelete == 1, foreignKeys == 1, !wal || journalMode == "wal" else {
            throw StorageError.failed(
                "SQLite settings did not take on the writer: synchronous=\(synchronous) (want \(expected)), "
                    + "secure_delete=\(secureDelete), foreign_keys=\(foreignKeys), journal_mode=\(journalMode)"
            )
        }
    }

    /// Retries a WAL purge that a recall could not finish in time (a reader held an old snapshot), until cancelled:
    /// run it as a service. `report(false)` when a purge became owed, `report(true)` once it is done.
    public func runPendingPurges(report: @Sendable (Bool) -> Void) async {
        await walPurge?.runPending(report: report)
    }

    /// Runs `body` as one atomic write, group-committed with concurrent writes (see ``GroupCommit``); `queued` is called
    /// once it has its place in the commit order.
    func write<T: Sendable>(
        queued: (@Sendable () -> Void)? = nil,
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(StorageError) -> T {
        // An administrative action's row goes in the savepoint of its first write (ADR 0048).
        let audit = AuditTrail.pending
        do {
            guard let audit else { return try await groupCommit.write(queued: queued, body) }
            let value = try await groupCommit.write(queued: queued) { db in
                let value = try body(db)
                _ = try db.rows(AuditEntry.upsert(audit, status: nil, code: nil))
                return value
            }
            audit.markRecorded()
            return value
        } catch let error as StorageError {
            throw error
        } catch {
            throw .failed(String(reflecting: error))
        }
    }

    /// Runs `body` on a reading connection. On the store's thread it runs right here, on the thread's own connection
    /// (`GroupCommit.threadReader`, ADR 0062; an in-memory database: GRDB's synchronous read); elsewhere (the shared
    /// task pool, which must not block; the readers' lane, whose few threads serve every store's queries) GRDB's
    /// asynchronous read hops to its queue and back (ADR 0037).
    /// The synchronous read, on the calling thread (a function of its own: in an `async` one, `read` is the
    /// asynchronous overload).
    private func readHere<T>(_ body: (Database) throws -> T) throws -> T {
        if let threadReader = groupCommit.threadReader { return try threadReader.inDatabase(body) }
        return try writer.read(body)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StorageError) -> T {
        do {
            if StoreThread.current === groupCommit.thread { return try readHere(body) }
            return try await writer.read(body)
        } catch let error as StorageError {
            throw error
        } catch {
            throw .failed(String(reflecting: error))
        }
    }
}
