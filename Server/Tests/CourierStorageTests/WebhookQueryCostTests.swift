// Courier — Apache-2.0
import GRDB
import GRDBSQLite
import Testing

@testable import CourierStorageSQLite

/// What the dispatcher's queries on SQLite cost, counted by SQLite itself (`SQLITE_STMTSTATUS_VM_STEP`: the virtual
/// machine's steps, which grow with every row a statement reads): a claim costs the number of queues, and recording a
/// run costs the deliveries in backoff, never the backlog nor the retained history (7 days of deliveries by default).
@Suite("Webhook queries on SQLite cost the queues, not the backlog or the history")
struct WebhookQueryCostTests {
    /// A store whose one endpoint has `delivered` finished deliveries, `pending` waiting in 5 conversations, and one
    /// in backoff.
    static func store(delivered: Int, pending: Int) async throws -> SQLiteStore {
        let store = try SQLiteStore(location: .inMemory)
        try await store.writer.write { db in
            try db.execute(
                sql: "INSERT INTO webhook_endpoint (id, url, events, secret, created_at) VALUES ('e', 'http://x', '*', 's', 0)"
            )
            let insert = try db.makeStatement(
                sql: """
                    INSERT INTO webhook_delivery (endpoint_id, event_id, type, conversation_id, created_at, payload,
                        next_attempt_at, state, attempts)
                    VALUES ('e', ?, 'message.created', ?, 0, '{}', ?, ?, ?)
                    """
            )
            for index in 0..<delivered { try insert.execute(arguments: ["d\(index)", "c\(index % 5)", 0, "delivered", 1]) }
            try insert.execute(arguments: ["backoff", "c9", 1_000_000, "pending", 3])
            for index in 0..<pending { try insert.execute(arguments: ["p\(index)", "c\(index % 5)", 0, "pending", 0]) }
        }
        return store
    }

    /// The steps SQLite's virtual machine took to run `sql` once.
    static func steps(_ store: SQLiteStore, _ sql: String, _ arguments: StatementArguments) async throws -> Int32 {
        try await store.writer.write { db in
            let statement = try db.makeStatement(sql: sql)
            _ = try Row.fetchAll(statement, arguments: arguments)
            return sqlite3_stmt_status(statement.sqliteStatement, SQLITE_STMTSTATUS_VM_STEP, 0)
        }
    }

    @Test("recording a run's success does not read the endpoint's delivered history")
    func recordingIgnoresHistory() async throws {
        // Made due now: the one delivery in backoff, found by its index whatever lies beside it.
        let arguments: StatementArguments = [10, 10, 1]
        let small = try await Self.steps(try await Self.store(delivered: 100, pending: 10), SQLiteStore.dueAfterSuccess, arguments)
        let large = try await Self.steps(try await Self.store(delivered: 20_000, pending: 10), SQLiteStore.dueAfterSuccess, arguments)
        #expect(large <= small + 20, "\(small) steps with 100 delivered, \(large) with 20,000")
    }

    @Test("finding the queue heads walks the queues, not every pending delivery")
    func claimingIgnoresBacklog() async throws {
        let sql = SQLiteStore.queueHeads(skippingEndpoints: 0)
        let arguments: StatementArguments = [10, 10, 64]
        let smallStore = try await Self.store(delivered: 0, pending: 50)
        let largeStore = try await Self.store(delivered: 0, pending: 20_000)
        let small = try await Self.steps(smallStore, sql, arguments)
        let large = try await Self.steps(largeStore, sql, arguments)
        #expect(large <= small + 100, "\(small) steps with 50 pending, \(large) with 20,000")
        // And it finds them: the oldest delivery of each of the 5 due queues (the one in backoff is not due).
        let heads = try await largeStore.writer.read { db in
            try String.fetchAll(db, sql: "SELECT d.event_id FROM (\(sql)) h JOIN webhook_delivery d ON d.seq = h.seq", arguments: arguments)
        }
        #expect(heads == ["p0", "p1", "p2", "p3", "p4"])
    }
}
