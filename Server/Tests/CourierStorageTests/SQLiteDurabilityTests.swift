// Courier — Apache-2.0
import CourierStorageSQLite
import CourierTestSupport
import Testing

/// The settings on the connection that writes (the one whose commits are acknowledged): GRDB turns `synchronous` to
/// NORMAL when it enables WAL, so a check through a reader connection would pass while writes were not synced.
/// `DurabilityTests` (CourierReliabilityTests) checks the same promise from outside: fsyncs per acknowledged send.
@Suite("SQLite durability settings")
struct SQLiteDurabilityTests {
    @Test("a file store's writer runs in WAL mode with synchronous=FULL and secure_delete by default")
    func defaults() async throws {
        let folder = try TemporaryFolder()
        let store = try SQLiteStore(location: .file(folder.path + "/d.sqlite"))
        let pragmas = try await store.writerPragmas()
        #expect(pragmas.journalMode == "wal")
        #expect(pragmas.synchronous == 2)
        #expect(pragmas.secureDelete)
    }

    @Test("synchronous=NORMAL on the writer is an explicit opt-in")
    func normalOptIn() async throws {
        let folder = try TemporaryFolder()
        let store = try SQLiteStore(location: .file(folder.path + "/d.sqlite"), durability: .normal)
        #expect(try await store.writerPragmas().synchronous == 1)
    }
}
