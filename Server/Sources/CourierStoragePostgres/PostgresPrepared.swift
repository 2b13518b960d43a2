// Courier — Apache-2.0
internal import PostgresNIO

/// The text of a statement on the hot path (every send, delivery or read runs it), which PostgreSQL parses and plans
/// once per connection instead of once per execution: a `perf` profile of `courier-bench direct` on PostgreSQL put
/// 39 % of the database's CPU in parsing, analysing and planning unnamed statements (docs/benchmarks-history.md). Statements
/// run once in a while stay inline `PostgresQuery`s.
protocol HotStatement {
    /// The SQL, with `$1`, `$2` … for the bindings in order.
    static var sql: String { get }
}

/// A ``HotStatement`` with its bindings, as PostgresNIO's prepared statement: named after its type, prepared on a
/// connection the first time it runs there.
struct Prepared<Statement: HotStatement>: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static var sql: String { Statement.sql }

    /// The statement's type name, short: PostgreSQL keeps the first 63 bytes of a name, and the default (the full
    /// generic type, `CourierStoragePostgres.Prepared<CourierStoragePostgres.PostgresStore.…>`) made every statement
    /// the same one.
    static var name: String { "courier.\(String(describing: Statement.self))" }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

extension PostgresConnection {
    /// Runs `statement` with `bindings` (`$1`, `$2` … in order) and returns its rows.
    func run<Statement: HotStatement>(
        _ statement: Statement.Type,
        _ bindings: PostgresBindings,
        logger: Logger
    ) async throws -> [PostgresRow] {
        var rows: [PostgresRow] = []
        for try await row in try await execute(Prepared<Statement>(bindings: bindings), logger: logger) {
            rows.append(row)
        }
        return rows
    }
}

extension PostgresBindings {
    /// Bindings from values in order: `[a, b, nil as String?]`.
    static func of<each Value>(_ values: repeat each Value) throws -> PostgresBindings
    where repeat each Value: PostgresThrowingDynamicTypeEncodable {
        var bindings = PostgresBindings()
        repeat try bindings.append(each values)
        return bindings
    }
}
