// Courier — Apache-2.0

/// What a store tells about its commits, for metrics (issue 21: group-commit batch size and commit latency).
public protocol StoreObservation: Sendable {
    /// Told of every transaction the store commits (or fails to).
    var commits: CommitObserver { get }
}

/// One committed transaction as the metrics see it.
public struct CommitRecord: Sendable, Hashable {
    /// The write operations it carried: on SQLite, the group commit's batch (each in its own savepoint); on
    /// PostgreSQL, 1 (each operation is its own transaction).
    public let operations: Int
    /// From handing the transaction to the database to its commit returning, the fsync included: what every
    /// operation of the batch waited for after it was taken. On PostgreSQL it starts when the transaction asks the
    /// pool for a connection, so a pool that is short of connections shows here.
    public let duration: Duration

    public init(operations: Int, duration: Duration) {
        self.operations = operations
        self.duration = duration
    }
}

/// The observers of a store's commits. A server adds its metrics when it is built on the store; a store opened with
/// no server (tools, tests) has none, and recording is then a lock taken and released.
public final class CommitObserver: Sendable {
    private let observers = Locked<[@Sendable (CommitRecord) -> Void]>([])

    public init() {}

    /// Calls `observer` after every later commit, on the thread that committed: it must be quick and not block.
    public func add(_ observer: @escaping @Sendable (CommitRecord) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// A transaction of `operations` committed after `duration`.
    package func record(operations: Int, duration: Duration) {
        let observers = observers.withLock { $0 }
        guard !observers.isEmpty else { return }
        let record = CommitRecord(operations: operations, duration: duration)
        for observer in observers { observer(record) }
    }
}

/// Where an append stands in the order of writes (pipelining, ADR 0018): a store whose writes commit in the order
/// they were queued (SQLite's group commit) calls ``onQueued`` once an append has its place in that queue, so the
/// server may start the connection's next send into the same conversation — queued behind it, it commits after it
/// or in the same transaction after it, and takes the next seq — without waiting for the commit. A store that orders
/// appends otherwise (PostgreSQL's row lock) never calls it, and the next send waits for the commit.
public enum AppendOrdering {
    @TaskLocal public static var onQueued: (@Sendable () -> Void)?
}
