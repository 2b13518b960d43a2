// Courier — Apache-2.0
import CourierStorageSQLite
import CourierTestSupport
import Testing

@Suite("SQLite durability settings")
struct SQLiteDurabilityTests {
    @Test("a file store runs in WAL mode with synchronous=FULL by default")
    func defaults() async throws {
        let folder = try TemporaryFolder()
        let store = try SQLiteStore(location: .file(folder.path + "/d.sqlite"))
        let pragmas = try await store.pragmas()
        #expect(pragmas.journalMode == "wal")
        #expect(pragmas.synchronous == 2)
    }

    @Test("synchronous=NORMAL is an explicit opt-in")
    func normalOptIn() async throws {
        let folder = try TemporaryFolder()
        let store = try SQLiteStore(location: .file(folder.path + "/d.sqlite"), durability: .normal)
        #expect(try await store.pragmas().synchronous == 1)
    }
}
