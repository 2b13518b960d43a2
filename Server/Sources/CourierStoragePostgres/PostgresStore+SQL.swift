// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
internal import PostgresNIO

/// Statements written once (``SQLQuery``), run on PostgreSQL: `$1`, `$2` … placeholders, a list as one array
/// parameter unnested.
extension SQLDialect {
    static let postgres = SQLDialect(
        placeholder: { "$\($0)" },
        list: { n, values in
            if case .texts = values { "(SELECT unnest($\(n)::text[]) AS value)" } else { "(SELECT unnest($\(n)::bigint[]) AS value)" }
        },
        lockRows: "FOR UPDATE",
        json: { expression in
            func path(_ keys: [String]) -> String { "'{" + keys.joined(separator: ",") + "}'" }
            switch expression {
            case .text(let column, let paths):
                return "coalesce(" + paths.map { "(\(column)::jsonb #>> \(path($0)))" }.joined(separator: ", ") + ")"
            case .removing(let column, let paths):
                return paths.reduce("\(column)::jsonb") { "(\($0) #- \(path($1)))" } + "::text"
            }
        }
    )
}

extension PostgresStore: SQLRunner, AccountStore, ModerationStore, ViewStore, ImportStore, MediaStore, CredentialStore,
    TypingStore, ProfileStore, ReactionStore
{
    public func readRows(_ query: SQLQuery) async throws(StorageError) -> [SQLRow] {
        try await withPooledConnection { connection in try await connection.rows(query, logger: logger) }
    }

    public func writeRows(_ queries: [SQLQuery]) async throws(StorageError) -> [[SQLRow]] {
        // One statement commits on its own, unless an administrative action's row goes with it.
        guard queries.count > 1 || AuditTrail.pending != nil else {
            return try await autocommit { connection in [try await connection.rows(queries[0], logger: logger)] }
        }
        return try await transaction { connection in
            var results: [[SQLRow]] = []
            for query in queries { results.append(try await connection.rows(query, logger: logger)) }
            return results
        }
    }

    public func read<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output {
        try await withPooledConnection { connection in try await connection.run(procedure, logger: logger) }
    }

    public func write<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output {
        try await transaction { connection in try await connection.run(procedure, logger: logger) }
    }

    public func notification(_ content: ChangeNotice.Content) throws(StorageError) -> SQLQuery? {
        let payloads: [String]
        do {
            payloads = try notificationPayloads(ChangeNotice(content, origin: nodeID))
        } catch {
            throw .failed("A change could not be encoded for the other nodes: \(error)")
        }
        // What shared SQL tells (a view, an account's change) always fits one notice.
        guard payloads.count == 1, let payload = payloads.first else {
            throw .failed("A change did not fit one notification.")
        }
        return "SELECT pg_notify(\(Self.channel), \(payload))"
    }
}

extension PostgresConnection {
    /// Runs `procedure`'s statements on this connection (in its transaction, if one is open).
    func run<Procedure: SQLProcedure>(_ procedure: Procedure, logger: Logger) async throws -> Procedure.Output {
        var procedure = procedure
        return try await procedure.drive { query in try await rows(query, logger: logger) }
    }

    /// Runs `queries` in order on this connection.
    func run(_ queries: [SQLQuery], logger: Logger) async throws {
        for query in queries { _ = try await rows(query, logger: logger) }
    }

    /// Runs `query` on this connection and returns its rows.
    func rows(_ query: SQLQuery, logger: Logger) async throws -> [SQLRow] {
        let (sql, binds) = query.rendered(.postgres)
        var bindings = PostgresBindings(capacity: binds.count)
        for bind in binds {
            switch bind {
            case .int(let value): bindings.append(value)
            case .text(let value): bindings.append(value)
            case .bool(let value): bindings.append(value)
            case .ints(let values): bindings.append(values)
            case .texts(let values): bindings.append(values)
            }
        }
        var rows: [SQLRow] = []
        if let prepared = SharedHotStatements.runners[sql] {
            for row in try await prepared(self, bindings, logger) { rows.append(SQLRow(try row.map(SQLValue.init))) }
            return rows
        }
        for try await row in try await self.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger) {
            rows.append(SQLRow(try row.map(SQLValue.init)))
        }
        return rows
    }
}

/// Statements written once that run on the hot path (``MarkReadProcedure/hotStatements``,
/// ``ReadStatements/hot``), prepared once per
/// connection as a ``HotStatement`` is, found by their text: what runs unnamed is parsed and planned on every
/// execution. Each takes a slot, a statement type of its own (PostgresNIO names a prepared statement by its type).
enum SharedHotStatements {
    typealias Runner = @Sendable (PostgresConnection, PostgresBindings, Logger) async throws -> [PostgresRow]

    static let texts: [String] = (MarkReadProcedure.hotStatements + ReadStatements.hot).map {
        $0.rendered(.postgres).sql
    }

    static let runners: [String: Runner] = {
        let slots: [Runner] = [
            run(Slot0.self), run(Slot1.self), run(Slot2.self), run(Slot3.self), run(Slot4.self), run(Slot5.self),
            run(Slot6.self), run(Slot7.self), run(Slot8.self),
        ]
        precondition(texts.count <= slots.count, "More shared hot statements than slots: add slots.")
        return Dictionary(zip(texts, slots), uniquingKeysWith: { first, _ in first })
    }()

    private static func run<Slot: SharedSlot>(_: Slot.Type) -> Runner {
        { connection, bindings, logger in try await connection.run(Shared<Slot>.self, bindings, logger: logger) }
    }

    protocol SharedSlot: Sendable { static var index: Int { get } }
    enum Shared<Slot: SharedSlot>: HotStatement { static var sql: String { texts[Slot.index] } }
    enum Slot0: SharedSlot { static let index = 0 }
    enum Slot1: SharedSlot { static let index = 1 }
    enum Slot2: SharedSlot { static let index = 2 }
    enum Slot3: SharedSlot { static let index = 3 }
    enum Slot4: SharedSlot { static let index = 4 }
    enum Slot5: SharedSlot { static let index = 5 }
    enum Slot6: SharedSlot { static let index = 6 }
    enum Slot7: SharedSlot { static let index = 7 }
    enum Slot8: SharedSlot { static let index = 8 }
}

extension SQLValue {
    init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .int2, .int4, .int8: self = .int(try cell.decode(Int64.self))
        case .bool: self = .bool(try cell.decode(Bool.self))
        default: self = .text(try cell.decode(String.self))
        }
    }
}
