// Courier — Apache-2.0

/// What a store tells about its commits, for metrics (group-commit batch size and commit latency).
public protocol StoreObservation: Sendable {
    /// Told of every transaction the store commits (or fails to).
    var commits: CommitObserver { get }
    /// Where the server runs the requests that write, when the store has a thread of its own for its writes (SQLite's
    /// ``StoreThread``): a request's task then waits for its commit without leaving that thread (ADR 0037). `nil`: the
    /// shared task pool (PostgreSQL, whose answers arrive on its connections' event loops anyway).
    var requestExecutor: (any TaskExecutor)? { get }
}

extension StoreObservation {
    public var requestExecutor: (any TaskExecutor)? { nil }
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

