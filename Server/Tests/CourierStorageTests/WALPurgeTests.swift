// Courier — Apache-2.0
import CourierTestSupport
import Foundation
import GRDB
import Testing

@testable import CourierStorageSQLite

/// ADR 0007/0011: after a recall the WAL is folded into the (zeroed) database file and truncated — off the writer's
/// path, and never reported done when it is not.
@Suite("WAL purge", .timeLimit(.minutes(5)))
struct WALPurgeTests {
    @Test("a purge a reader blocks is reported not done and stays owed; writes go on; it is done once the reader leaves")
    func blockedByReader() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/courier.sqlite"
        let store = try SQLiteStore(location: .file(path))
        let purge = try #require(store.walPurge)
        try await store.writer.write { db in
            try db.execute(sql: "INSERT INTO account (id, created_at) VALUES ('alice', 1)")
        }
        // Another connection reads on an old snapshot and keeps its transaction open.
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true
        let reader = try DatabaseQueue(path: path, configuration: configuration)
        try reader.inDatabase { db in
            try db.execute(sql: "BEGIN DEFERRED")
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM account")
        }
        try await store.writer.write { db in
            try db.execute(sql: "INSERT INTO account (id, created_at) VALUES ('bob', 2)")
        }

        let done = await purge.purge(within: .milliseconds(300))
        #expect(!done && purge.isPending, "reported not done, and owed")

        // The purge waits off the writer's path: writes go on.
        let start = ContinuousClock.now
        try await store.writer.write { db in
            try db.execute(sql: "INSERT INTO account (id, created_at) VALUES ('carol', 3)")
        }
        // A writer held up by the purge would wait out its 10 s busy timeout; 5 s leaves room for a loaded machine.
        #expect(ContinuousClock.now - start < .seconds(5))

        try reader.inDatabase { db in try db.execute(sql: "COMMIT") }
        let (reports, report) = AsyncStream.makeStream(of: Bool.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.runPendingPurges { report.yield($0) } }
            for await finished in reports where finished { break }
            group.cancelAll()
        }
        #expect(!purge.isPending)
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(wal == 0, "the WAL was truncated")
    }

    @Test("a store that closes folds its WAL into the file and deletes it, its store thread's reader closed first")
    func closeLeavesNoWAL() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/courier.sqlite"
        do {
            let store = try SQLiteStore(location: .file(path))
            #expect(store.groupCommit.threadReader != nil)
            try await store.writer.write { db in
                try db.execute(sql: "INSERT INTO account (id, created_at) VALUES ('alice', 1)")
            }
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        }
        // SQLite deletes the WAL only when the last connection to close can write; a read-only one left last keeps it,
        // and a copy of the file alone would miss the commits still in it.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the WAL is left beside the file")
        let reopened = try DatabaseQueue(path: path)
        #expect(try await reopened.read { db in try String.fetchOne(db, sql: "SELECT id FROM account") } == "alice")
    }
}
