// Courier — Apache-2.0
public import CourierDomain

/// Changes committed by other nodes sharing the same database (PostgreSQL LISTEN/NOTIFY). The embedded SQLite store
/// has no feed: one node is the only writer.
public protocol ChangeFeed: Sendable {
    /// Runs until cancelled, reconnecting as needed. Calls `onChange` for each change committed by another node, and
    /// `onResync` whenever changes may have been missed (after every (re)connection of the listener).
    func run(
        onChange: @escaping @Sendable (ChangeNotice) async -> Void,
        onResync: @escaping @Sendable () async -> Void
    ) async throws

    /// Whether the feed is listening now: while it is not, other nodes' changes reach this node's devices only when
    /// they sync (the node is not ready, `GET /health/ready`).
    var isListening: Bool { get }
}
