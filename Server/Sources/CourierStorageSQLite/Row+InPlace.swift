// Courier — Apache-2.0
internal import GRDB

extension Row {
    /// The first row of `statement`, mapped where it lies: unlike `fetchOne`, no copy of the row is made (a third
    /// of a group read's time went to copying rows). `transform` must not keep the row it is given.
    static func first<T>(
        _ statement: Statement,
        arguments: StatementArguments,
        _ transform: (Row) throws -> T
    ) throws -> T? {
        let cursor = try fetchCursor(statement, arguments: arguments)
        return try withExtendedLifetime(cursor) { try cursor.next().map(transform) }
    }

    /// Every row of `statement`, each mapped where it lies (no copies, unlike `fetchAll`).
    static func all<T>(
        _ statement: Statement,
        arguments: StatementArguments,
        _ transform: (Row) throws -> T
    ) throws -> [T] {
        let cursor = try fetchCursor(statement, arguments: arguments)
        var values: [T] = []
        while let row = try cursor.next() { values.append(try transform(row)) }
        return values
    }
}
