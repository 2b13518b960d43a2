// Courier — Apache-2.0
public import CourierStorage
internal import CourierDomain
public import CourierStoragePostgres
public import CourierStorageSQLite
internal import Foundation
public import Logging
public import ServiceLifecycle

/// An opened store and what running it needs: SQLite (embedded, one node) or a shared PostgreSQL database (several
/// nodes, with a change feed between them). The executable and the test support both open stores through this.
public struct Backend: Sendable {
    public let store: any CourierStore
    /// Changes committed by other nodes (PostgreSQL only).
    public let changeFeed: (any ChangeFeed)?
    /// Services to run before the node (the PostgreSQL connection pool).
    public let services: [any Service]
    /// Runs before the node listens (PostgreSQL migrations; SQLite migrates when opened).
    public let prepare: @Sendable () async throws -> Void
    /// A short description for logs, without secrets.
    public let description: String

    /// The embedded SQLite store, and its service that finishes WAL purges a recall could not finish in time.
    public static func sqlite(
        _ location: SQLiteStore.Location,
        durability: SQLiteStore.Durability = .full,
        logger: Logger = Logger(label: "courier", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws
        -> Backend
    {
        if case .file(let path) = location {
            // The folder may not exist yet, e.g. when the app secret comes from the environment instead of a file.
            let folder = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(
                atPath: folder.isEmpty ? "." : folder,
                withIntermediateDirectories: true
            )
        }
        let store = try SQLiteStore(location: location, durability: durability)
        if let (from, to) = store.migrated { logMigration(from: from, to: to, logger: logger) }
        let (place, services): (String, [any Service]) =
            switch location {
            case .file(let path): (path, [PendingPurges(store: store, logger: logger)])
            case .inMemory: ("memory", [])  // no WAL, nothing to purge
            }
        return Backend(
            store: store,
            changeFeed: nil,
            services: services,
            prepare: {},
            description: "SQLite (\(place))"
        )
    }

    /// A PostgreSQL database shared by several nodes; this node gets a fresh node id.
    public static func postgres(
        url: String,
        durability: PostgresStore.Durability = .full,
        timeouts: PostgresStore.Timeouts = .standard,
        logger: Logger
    ) throws -> Backend {
        let store = try PostgresStore(url: url, durability: durability, timeouts: timeouts, logger: logger)
        return Backend(
            store: store,
            changeFeed: try PostgresChangeFeed(url: url, nodeID: store.nodeID, logger: logger),
            services: [store],
            prepare: {
                if let (from, to) = try await store.migrate() {
                    logMigration(from: from.map(String.init), to: String(to), logger: logger)
                }
                try await store.checkDurability()
            },
            description: "PostgreSQL, node \(store.nodeID)"
        )
    }
}

/// The line a start that migrated the schema logs (`from`: `nil` for a new database).
private func logMigration(from: String?, to: String, logger: Logger) {
    logger.notice("Database schema migrated", metadata: ["schema.from": "\(from ?? "new")", "schema.to": "\(to)"])
}

/// Retries the WAL purges that recalls could not finish in time (a reader held an old snapshot), with a log line when
/// one becomes owed and when it is done (ADR 0007).
struct PendingPurges: Service {
    let store: SQLiteStore
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await store.runPendingPurges { done in
                if done {
                    logger.notice("WAL purge done: recalled bodies are out of the database files")
                } else {
                    logger.warning("WAL purge owed: a reader kept it from running; retrying")
                }
            }
        }
    }
}
