// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import GRDB
import Logging
import Testing

/// Upgrades are forward only (docs/operations.md): a database a newer build migrated is refused at open, naming the
/// schema, instead of being served with tables this build does not know.
@Suite("Schema versions")
struct SchemaVersionTests {
    @Test("a database migrated by a newer build is refused at open; one this build knows opens")
    func newerRefused() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/d.sqlite"
        // A new database: migrated from nothing to this build's schema, which is what --version names.
        let created = try SQLiteStore(location: .file(path))
        #expect(created.migrated != nil && created.migrated?.from == nil && created.migrated?.to == SQLiteStore.schemaVersion)
        #expect(SQLiteStore.schemaVersion == "v28")
        // Reopened by this build: fine, nothing to migrate (and nothing to log).
        #expect(try SQLiteStore(location: .file(path)).migrated == nil)
        // A later build's migration, as it would record it.
        let database = try DatabaseQueue(path: path)
        try await database.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99')") }
        try database.close()
        do {
            _ = try SQLiteStore(location: .file(path))
            Issue.record("a database migrated by a newer build was opened")
        } catch {
            #expect("\(error)".contains("migrated by a newer courier-server (schema v99"), "\(error)")
        }
    }

    @Test(
        "PostgreSQL: migrations say from which schema to which; a newer schema makes a running node unready, and is refused at start in one line",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func postgresMigrations() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let logger = Logger(label: "courier.test", factory: { _ in SwiftLogNoOpLogHandler() })
            let store = try PostgresStore(url: url, nodeID: "schema", timeouts: .patient, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                let first = try await store.migrate()
                #expect(first != nil && first?.from == nil && first?.to == PostgresStore.schemaVersion)
                #expect(try await store.migrate() == nil)
                try await store.checkWritable()
                // Another node, of a newer build, migrates while this one runs: this one turns unready (readiness
                // probes checkWritable) and says why.
                try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                    try await session.execute("INSERT INTO courier_migration (version) VALUES (99)")
                }
                do {
                    try await store.checkWritable()
                    Issue.record("a node that met a newer schema stayed ready")
                } catch {
                    #expect("\(error)".contains("schema 99") && "\(error)".contains("while this node ran"), "\(error)")
                }
                do {
                    try await store.migrate()
                    Issue.record("a database migrated by a newer build was accepted")
                } catch let error as StorageError {
                    guard case .failed(let reason) = error else { throw error }
                    #expect(reason.contains("migrated by a newer courier-server (schema 99") && !reason.contains("\n"))
                }
            }
        }
    }
}
