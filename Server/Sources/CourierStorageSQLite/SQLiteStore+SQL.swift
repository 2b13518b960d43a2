// Courier — Apache-2.0
internal import CourierStorage
public import CourierSQL
public import CourierDomain
internal import CourierWire
internal import GRDB

/// Statements written once (``SQLQuery``), run on SQLite: `?1`, `?2` … placeholders, a list as one JSON array read
/// by `json_each`, and each statement cached on its connection by its text.
extension SQLDialect {
    static let sqlite = SQLDialect(
        placeholder: { "?\($0)" },
        list: { n, _ in "(SELECT value FROM json_each(?\(n)))" },
        json: { expression in
            func path(_ keys: [String]) -> String { "'$." + keys.joined(separator: ".") + "'" }
            switch expression {
            case .text(let column, let paths):
                return "coalesce(" + paths.map { "json_extract(\(column), \(path($0)))" }.joined(separator: ", ") + ")"
            case .removing(let column, let paths):
                return "json_remove(\(column), " + paths.map(path).joined(separator: ", ") + ")"
            }
        }
    )
}

extension SQLiteStore: SQLRunner {
    public func readRows(_ query: SQLQuery) async throws(StorageError) -> [SQLRow] {
        try await read { db in try db.rows(query) }
    }

    public func writeRows(_ queries: [SQLQuery]) async throws(StorageError) -> [[SQLRow]] {
        try await write { db in try queries.map { try db.rows($0) } }
    }

    public func read<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output {
        try await read { db in try db.run(procedure) }
    }

    public func write<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output {
        try await write { db in try db.run(procedure) }
    }
}

extension Database {
    /// Runs `procedure`'s statements in this connection's transaction.
    func run<Procedure: SQLProcedure>(_ procedure: Procedure) throws -> Procedure.Output {
        var procedure = procedure
        return try procedure.drive(rows)
    }

    /// Runs `queries` in order in this connection's transaction.
    func run(_ queries: [SQLQuery]) throws {
        for query in queries { _ = try rows(query) }
    }

    /// Runs `query` in this connection's transaction and returns its rows.
    func rows(_ query: SQLQuery) throws -> [SQLRow] {
        let (sql, binds) = query.rendered(.sqlite)
        let statement = try cachedStatement(sql: sql)
        // As existentials: GRDB's initializer over a sequence of one concrete type maps it with a generic key path,
        // which the runtime instantiates on every call (2 % of the server's CPU in `direct --read-each`).
        statement.setUncheckedArguments(
            StatementArguments(binds.map { Optional($0.databaseValue as any DatabaseValueConvertible) })
        )
        let cursor = try Row.fetchCursor(statement)
        var rows: [SQLRow] = []
        while let row = try cursor.next() {
            var values: [SQLValue] = []
            values.reserveCapacity(row.count)
            for value in row.databaseValues { values.append(value.sqlValue) }
            rows.append(SQLRow(values))
        }
        return rows
    }
}

extension SQLBind {
    var databaseValue: DatabaseValue {
        switch self {
        case .int(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .bool(let value): value.databaseValue
        case .ints(let values): SQLJSON.seqList(values.map(Seq.init(rawValue:))).databaseValue
        case .texts(let values): SQLJSON.stringList(values).databaseValue
        }
    }
}

extension DatabaseValue {
    var sqlValue: SQLValue {
        switch storage {
        case .null: .null
        case .int64(let value): .int(value)
        case .string(let value): .text(value)
        // The schema stores no reals or blobs.
        case .double(let value): .int(Int64(value))
        case .blob(let value): .text(String(decoding: value, as: UTF8.self))
        }
    }
}
