// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import GRDB

/// The change stamps of the SQLite store (ADR 0017): a counter, one value per write transaction that changes what a
/// member sees. SQL takes it with `change_stamp()`, so a statement stamps the row it writes anyway; the first call
/// in a transaction draws the next value, and the group commit persists it in `change_clock` in that transaction.
/// One writer, so stamps follow commit order.
final class ChangeClock: Sendable {
    private struct State {
        /// The newest stamp committed.
        var committed: Int64 = 0
        /// The stamp of the transaction being written, once a statement asked for it.
        var pending: Int64?
    }

    private let state = Locked(State())

    /// `change_stamp()`, for every connection (only the writer calls it).
    var function: DatabaseFunction {
        DatabaseFunction("change_stamp", argumentCount: 0, pure: false) { [self] _ in stampForCurrentTransaction() }
    }

    func load(committed: Int64) { state.withLock { $0.committed = committed } }

    private func stampForCurrentTransaction() -> Int64 {
        state.withLock { state in
            if let pending = state.pending { return pending }
            state.pending = state.committed + 1
            return state.committed + 1
        }
    }

    /// In the writer's transaction, after its statements: records the stamp it used, if any.
    func persist(_ db: Database) throws {
        guard let stamp = state.withLock({ $0.pending }) else { return }
        try db.cachedStatement(sql: "UPDATE change_clock SET value = ?").execute(arguments: [stamp])
    }

    /// After the transaction: a committed stamp is the new floor; a rolled-back one is drawn again.
    func finish(committed: Bool) {
        state.withLock { state in
            if committed, let pending = state.pending { state.committed = pending }
            state.pending = nil
        }
    }
}
