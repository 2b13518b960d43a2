// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import GRDB
import Testing

/// Upgrades are forward only (docs/operations.md): a database a newer build migrated is refused at open, naming the
/// schema, instead of being served with tables this build does not know.
@Suite("Schema versions")
struct SchemaVersionTests {
    @Test("a database migrated by a newer build is refused at open; one this build knows opens")
    func newerRefused() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/d.sqlite"
        _ = try SQLiteStore(location: .file(path))
        // Reopened by this build: fine, nothing to migrate.
        _ = try SQLiteStore(location: .file(path))
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
}
