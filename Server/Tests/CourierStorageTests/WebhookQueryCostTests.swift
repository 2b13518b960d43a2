// Courier — Apache-2.0
import CourierSQL
import CourierStorage
import CourierWire
import GRDB
import GRDBSQLite
import Testing

@testable import CourierStorageSQLite

/// What the dispatcher's queries on SQLite cost, counted by SQLite itself (`SQLITE_STMTSTATUS_VM_STEP`: the virtual
/// machine's steps, which grow with every row a statement reads): a stream's look at its parked deliveries costs the
/// number of queues, and a success makes the deliveries in backoff due at the cost of those, never the backlog nor
/// the retained history (7 days of deliveries by default).
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

    /// The steps SQLite's virtual machine took to run `query` once, as the store runs it, and its rows.
    static func steps(_ store: SQLiteStore, _ query: SQLQuery) async throws -> (steps: Int32, rows: [Row]) {
        try await store.writer.write { db in
            let (sql, binds) = query.rendered(.sqlite)
            let statement = try db.makeStatement(sql: sql)
            let rows = try Row.fetchAll(statement, arguments: StatementArguments(binds.map(\.databaseValue)))
            return (sqlite3_stmt_status(statement.sqliteStatement, SQLITE_STMTSTATUS_VM_STEP, 0), rows)
        }
    }

    @Test("a success makes the deliveries in backoff due without reading the endpoint's delivered history")
    func successIgnoresHistory() async throws {
        let query = WebhookDelivery.dueAfterSuccess(of: "e", at: 10)
        let small = try await Self.steps(try await Self.store(delivered: 100, pending: 10), query).steps
        let largeStore = try await Self.store(delivered: 20_000, pending: 10)
        let large = try await Self.steps(largeStore, query).steps
        #expect(large <= small + 20, "\(small) steps with 100 delivered, \(large) with 20,000")
        // And it did: the one in backoff is due now.
        let due = try await largeStore.writer.read { db in
            try Int64.fetchOne(db, sql: "SELECT next_attempt_at FROM webhook_delivery WHERE event_id = 'backoff'")
        }
        #expect(due == 10)
    }

    @Test("finding the queue heads walks the queues, not every pending delivery")
    func headsIgnoreBacklog() async throws {
        let query = WebhookDelivery.queueHeads(of: "e", limit: 64)
        let small = try await Self.steps(try await Self.store(delivered: 0, pending: 50), query).steps
        let (large, heads) = try await Self.steps(try await Self.store(delivered: 0, pending: 20_000), query)
        #expect(large <= small + 100, "\(small) steps with 50 pending, \(large) with 20,000")
        // And it finds them: each queue's head, the soonest due first (the one in backoff last).
        #expect(heads.map { $0[0] as String } == ["c0", "c1", "c2", "c3", "c4", "c9"])
        #expect(heads.map { $0[1] as Int64 } == [0, 0, 0, 0, 0, 1_000_000])
    }
}
