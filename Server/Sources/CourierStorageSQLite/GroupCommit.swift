// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import GRDB

/// Group commit: write operations queued while the store's thread runs a round are written together at the round's
/// end, in one transaction — each in its own savepoint, so one failing operation rolls back only itself — and all of
/// them are answered after that transaction commits. With `synchronous=FULL` that is one fsync for the whole group
/// instead of one per operation, and the guarantee stays: nobody is answered before their write is durable.
///
/// The transaction runs on the store's own ``StoreThread`` with GRDB's synchronous API (ADR 0037): no dispatch queue
/// of GRDB's, no task. A caller on that thread (a request of a device, whose task runs there) queues its operation and
/// is resumed on it once the group committed, without a thread woken; a caller elsewhere (a REST handler, a webhook
/// cursor) wakes the thread once and is resumed on its own executor. Groups are written in the order their operations
/// were queued, at most `maxGroupSize` operations each, one group per round, so the requests a commit answers run
/// before the next group is written. Nothing here belongs to a task: cancelling a caller neither aborts a group nor
/// fails the writes queued behind it.
final class GroupCommit: Sendable {
    private typealias Operation = @Sendable (Database) throws -> any Sendable
    private typealias Resume = @Sendable (Result<any Sendable, any Error>) -> Void

    private struct Queue {
        var operations: [(run: Operation, resume: Resume)] = []
        /// A round's end is due to write what is queued.
        var scheduled = false
    }

    private let writer: any DatabaseWriter
    /// The thread the transactions run on; its rounds decide the groups.
    let thread: StoreThread
    private let queue = Locked(Queue())
    /// The most operations in one transaction (bounds how long one group holds the writer).
    let maxGroupSize: Int
    /// Told of each transaction: its number of operations and how long it took (metrics, tests).
    let commits: CommitObserver
    /// The change stamp the group's statements share, persisted in the group's transaction (ADR 0017).
    let clock: ChangeClock
    /// The thread's own reading connection (file databases; ADR 0062): only `thread` uses it.
    let threadReader: DatabaseQueue?

    init(
        writer: any DatabaseWriter,
        thread: StoreThread? = nil,
        maxGroupSize: Int = 256,
        commits: CommitObserver = CommitObserver(),
        clock: ChangeClock = ChangeClock(),
        threadReader: DatabaseQueue? = nil
    ) {
        precondition(maxGroupSize > 0)
        self.writer = writer
        self.thread = thread ?? StoreThread(name: "courier-writer")
        self.maxGroupSize = maxGroupSize
        self.commits = commits
        self.clock = clock
        self.threadReader = threadReader
    }

    /// The thread stops, then its reading connection closes, before the writer's: SQLite folds the WAL into the file
    /// and deletes it only when the last connection to close can write (ADR 0062).
    deinit {
        thread.stop()
        try? threadReader?.close()
    }

    /// Operations waiting for a group (tests).
    var queuedCount: Int { queue.withLock { $0.operations.count } }

    /// Runs `operation` in a savepoint of the next group transaction; returns its result once that has committed.
    /// `queued` is called once the operation has its place in the queue: operations queued later run after it.
    func write<T: Sendable>(
        queued: (@Sendable () -> Void)? = nil,
        _ operation: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Sendable, any Error>) in
            let schedule = queue.withLock { queue -> Bool in
                queue.operations.append(({ db in try operation(db) }, { continuation.resume(with: $0) }))
                defer { queue.scheduled = true }
                return !queue.scheduled
            }
            queued?()
            if schedule { thread.atRoundEnd { [self] in commitGroup() } }
        }
        return result as! T
    }

    /// On the thread, at a round's end: one transaction for the oldest queued operations; the rest wait for the next
    /// round's end.
    private func commitGroup() {
        let (group, more) = queue.withLock { queue -> (ArraySlice<(run: Operation, resume: Resume)>, Bool) in
            let group = queue.operations.prefix(maxGroupSize)
            queue.operations.removeFirst(group.count)
            queue.scheduled = !queue.operations.isEmpty
            return (group, queue.scheduled)
        }
        if more { thread.atRoundEnd { [self] in commitGroup() } }
        guard !group.isEmpty else { return }
        let started = ContinuousClock.now
        let results: [Result<any Sendable, any Error>]
        do {
            results = try writer.writeWithoutTransaction { db in
                var results: [Result<any Sendable, any Error>] = []
                try db.inTransaction(.immediate) {
                    results = group.map { operation in
                        Result { () throws -> any Sendable in
                            var value: (any Sendable)?
                            try db.inSavepoint {
                                value = try operation.run(db)
                                return .commit
                            }
                            return value!
                        }
                    }
                    try clock.persist(db)
                    return .commit
                }
                return results
            }
            clock.finish(committed: true)
        } catch {
            // The transaction itself failed (its commit included): nothing of this group is durable.
            clock.finish(committed: false)
            results = group.map { _ in .failure(error) }
        }
        commits.record(operations: group.count, duration: ContinuousClock.now - started)
        for (operation, result) in zip(group, results) { operation.resume(result) }
    }
}
