// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage

/// One SQL statement written once for every backend (ADR 0024): its text and its bound values, built by
/// interpolation as PostgresNIO's `PostgresQuery` is (`"… WHERE id = \(id)"` binds `id`, never splices it). Each
/// backend renders it in its own dialect (``SQLDialect``) and runs it (``SQLRunner``), and the rows come back as
/// ``SQLRow``s, decoded by code written once too.
///
/// Write it in the SQL both dialects share: `INSERT … ON CONFLICT`, `RETURNING`, row values, `CAST(x AS BIGINT)`
/// for a NULL or a value whose type PostgreSQL cannot infer. A list of values is `\(list: values)`, an expression
/// that reads as a subquery of one column named `value` (`x IN \(list: ids)`, `SELECT value FROM \(list: ids) AS l`),
/// one bound value however long the list. SQLite wants `WHERE true` in an `INSERT … SELECT … ON CONFLICT`.
public struct SQLQuery: Sendable, ExpressibleByStringInterpolation {
    enum Part: Sendable {
        case text(String)
        case bind(SQLBind)
        case list(SQLBind)
        case lockRows(of: String?)
        case json(SQLJSONPath)
    }

    private(set) var parts: [Part]

    public init(stringLiteral value: String) {
        parts = [.text(value)]
    }

    public init(stringInterpolation: StringInterpolation) {
        parts = stringInterpolation.parts
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            parts.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ literal: String) {
            parts.append(.text(literal))
        }

        public mutating func appendInterpolation(_ value: Int64?) { parts.append(.bind(.int(value))) }
        public mutating func appendInterpolation(_ value: Int?) { parts.append(.bind(.int(value.map(Int64.init)))) }
        public mutating func appendInterpolation(_ value: String?) { parts.append(.bind(.text(value))) }
        public mutating func appendInterpolation(_ value: Bool) { parts.append(.bind(.bool(value))) }

        /// A one-column subquery of `values`: `seq IN \(list: seqs)`.
        public mutating func appendInterpolation(list values: [Int64]) { parts.append(.list(.ints(values))) }

        /// A one-column subquery of `values`: `account IN \(list: accounts)`.
        public mutating func appendInterpolation(list values: [String]) { parts.append(.list(.texts(values))) }

        /// Locks the rows read until the transaction ends, where the backend locks rows (PostgreSQL's `FOR UPDATE`;
        /// SQLite's single writer needs none).
        public mutating func appendInterpolation(lockRows: Void) { parts.append(.lockRows(of: nil)) }

        /// Locks, of the rows a join reads, those of the table named `alias` (`FOR UPDATE OF r`), where the backend
        /// locks rows.
        public mutating func appendInterpolation(lockRowsOf alias: String) { parts.append(.lockRows(of: alias)) }

        /// A JSON text column read or rewritten at a path, as the backend writes it (``SQLJSONPath``).
        public mutating func appendInterpolation(json path: SQLJSONPath) { parts.append(.json(path)) }

        /// A fragment built elsewhere, with its values.
        public mutating func appendInterpolation(_ fragment: SQLQuery) { parts += fragment.parts }

        /// SQL text as it is (a column list, a fixed condition): never a value from outside.
        public mutating func appendInterpolation(unescaped text: String) { parts.append(.text(text)) }
    }

    /// `lhs` followed by `rhs`: a statement built in pieces.
    public static func + (lhs: SQLQuery, rhs: SQLQuery) -> SQLQuery {
        var joined = lhs
        joined += rhs
        return joined
    }

    public static func += (lhs: inout SQLQuery, rhs: SQLQuery) {
        lhs.parts += rhs.parts
    }

    /// The text in `dialect` and the values bound to its placeholders, in order.
    public func rendered(_ dialect: SQLDialect) -> (sql: String, binds: [SQLBind]) {
        var sql = ""
        var binds: [SQLBind] = []
        var capacity = 0
        for part in parts {
            if case .text(let text) = part { capacity += text.utf8.count } else { capacity += 48 }
        }
        sql.reserveCapacity(capacity)
        binds.reserveCapacity(parts.count / 2)
        for part in parts {
            switch part {
            case .text(let text):
                sql += text
            case .bind(let value):
                binds.append(value)
                sql += dialect.placeholder(binds.count)
            case .list(let values):
                binds.append(values)
                sql += dialect.list(binds.count, values)
            case .lockRows(let alias):
                sql += dialect.lockRows
                if let alias, !dialect.lockRows.isEmpty { sql += " OF " + alias }
            case .json(let path):
                sql += dialect.json(path)
            }
        }
        return (sql, binds)
    }
}

/// A value bound to a statement. Its type travels with it, also when it is NULL.
public enum SQLBind: Sendable, Equatable {
    case int(Int64?)
    case text(String?)
    case bool(Bool)
    case ints([Int64])
    case texts([String])
}

/// How a backend writes what ``SQLQuery`` leaves to it: placeholders and lists.
public struct SQLDialect: Sendable {
    /// The placeholder of the `n`th bound value (from 1).
    public let placeholder: @Sendable (_ n: Int) -> String
    /// A one-column subquery of the list bound as the `n`th value.
    public let list: @Sendable (_ n: Int, _ of: SQLBind) -> String
    /// What locks the rows a `SELECT` reads until the transaction ends, if the backend locks rows.
    public let lockRows: String
    /// A JSON text column's value at a path, or the column without some paths.
    public let json: @Sendable (SQLJSONPath) -> String

    public init(
        placeholder: @escaping @Sendable (_ n: Int) -> String,
        list: @escaping @Sendable (_ n: Int, _ of: SQLBind) -> String,
        lockRows: String = "",
        json: @escaping @Sendable (SQLJSONPath) -> String
    ) {
        self.placeholder = placeholder
        self.list = list
        self.lockRows = lockRows
        self.json = json
    }
}

/// An expression on a column of JSON text, whose keys are fixed names (never values from outside).
public enum SQLJSONPath: Sendable {
    /// The text at the first of `paths` that holds one (NULL when none does).
    case text(column: String, paths: [[String]])
    /// The JSON text without what is at `paths`.
    case removing(column: String, paths: [[String]])
}

/// A value read from a row.
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)
    case bool(Bool)
}

/// A row read by position: ``SQLRow``, and a backend's own row type where it decodes rows where they lie (SQLite's
/// sync pages), so that a row is described and decoded once (``WireMessage/init(_:)``).
public protocol SQLRowReading {
    func int64(_ column: Int) throws(StorageError) -> Int64
    func optionalInt64(_ column: Int) throws(StorageError) -> Int64?
    func string(_ column: Int) throws(StorageError) -> String
    func optionalString(_ column: Int) throws(StorageError) -> String?
    /// A boolean, stored as one on PostgreSQL and as 0 or 1 on SQLite.
    func bool(_ column: Int) throws(StorageError) -> Bool
}

/// A row of a statement's result, read by position.
public struct SQLRow: Sendable, SQLRowReading {
    public let values: [SQLValue]

    public init(_ values: [SQLValue]) {
        self.values = values
    }

    public func int64(_ column: Int) throws(StorageError) -> Int64 {
        guard let value = try optionalInt64(column) else { throw mismatch(column, "an integer") }
        return value
    }

    public func int(_ column: Int) throws(StorageError) -> Int { Int(try int64(column)) }

    public func optionalInt64(_ column: Int) throws(StorageError) -> Int64? {
        switch values[column] {
        case .null: nil
        case .int(let value): value
        case .bool(let value): value ? 1 : 0
        case .text: throw mismatch(column, "an integer")
        }
    }

    public func optionalInt(_ column: Int) throws(StorageError) -> Int? { try optionalInt64(column).map(Int.init) }

    public func string(_ column: Int) throws(StorageError) -> String {
        guard let value = try optionalString(column) else { throw mismatch(column, "a text") }
        return value
    }

    public func optionalString(_ column: Int) throws(StorageError) -> String? {
        switch values[column] {
        case .null: nil
        case .text(let value): value
        case .int, .bool: throw mismatch(column, "a text")
        }
    }

    /// A boolean, stored as one on PostgreSQL and as 0 or 1 on SQLite.
    public func bool(_ column: Int) throws(StorageError) -> Bool {
        switch values[column] {
        case .bool(let value): value
        case .int(let value): value != 0
        case .null, .text: throw mismatch(column, "a boolean")
        }
    }

    private func mismatch(_ column: Int, _ expected: String) -> StorageError {
        .failed("Column \(column) holds \(values[column]), not \(expected).")
    }
}

/// What a backend provides to run statements written once (docs/architecture.md).
public protocol SQLRunner: Sendable {
    /// Runs a statement that only reads, on a reader where the backend has one.
    func readRows(_ query: SQLQuery) async throws(StorageError) -> [SQLRow]

    /// Runs `queries` in order in one transaction that commits before this returns (on SQLite, in the group
    /// commit), and returns each one's rows.
    func writeRows(_ queries: [SQLQuery]) async throws(StorageError) -> [[SQLRow]]

    /// Runs `procedure`'s statements on one connection (on SQLite, in one read transaction: one snapshot).
    func read<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output

    /// Runs `procedure`'s statements in one transaction that commits before this returns (on SQLite, in the group
    /// commit); an error it throws rolls back everything it wrote.
    func write<Procedure: SQLProcedure>(_ procedure: Procedure) async throws(StorageError) -> Procedure.Output

    /// The statement that tells the other nodes of `change` when the transaction it runs in commits (PostgreSQL:
    /// `pg_notify`); `nil` where one node is the only writer (SQLite, the default).
    func notification(_ content: ChangeNotice.Content) throws(StorageError) -> SQLQuery?
}

extension SQLRunner {
    /// None: one node is the only writer (SQLite).
    public func notification(_ content: ChangeNotice.Content) throws(StorageError) -> SQLQuery? { nil }

    /// Runs one statement that writes, in a transaction of its own.
    public func writeRows(_ query: SQLQuery) async throws(StorageError) -> [SQLRow] {
        try await writeRows([query])[0]
    }
}

/// An operation of several statements written once, as a state machine (sans-I/O, like ``ReceiptListPager``): each
/// backend drives it with its own connection, synchronously in a SQLite transaction, asynchronously on PostgreSQL,
/// so the statements, their order and what is decided between them are the same on both.
public protocol SQLProcedure: Sendable {
    associatedtype Output: Sendable

    /// The next statement to run, or the result. Called first with `nil`, then with the rows of the statement it
    /// asked for.
    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Output>
}

public enum SQLStep<Output> {
    case run(SQLQuery)
    case done(Output)
}

extension SQLProcedure {
    /// Drives the procedure with `run`, which runs one statement and returns its rows.
    public mutating func drive(_ run: (SQLQuery) throws -> [SQLRow]) throws -> Output {
        var rows: [SQLRow]? = nil
        while true {
            switch try step(rows) {
            case .run(let query): rows = try run(query)
            case .done(let output): return output
            }
        }
    }

    /// Drives the procedure with `run`, which runs one statement and returns its rows.
    public mutating func drive(_ run: (SQLQuery) async throws -> [SQLRow]) async throws -> Output {
        var rows: [SQLRow]? = nil
        while true {
            switch try step(rows) {
            case .run(let query): rows = try await run(query)
            case .done(let output): return output
            }
        }
    }
}
