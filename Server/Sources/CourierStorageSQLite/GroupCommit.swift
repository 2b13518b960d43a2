// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import GRDB

/// Group commit: write operations that arrive while a transaction is being written are run together in the next
/// transaction — each in its own savepoint, so one failing operation rolls back only itself — and all of them are
/// answered after that transaction commits. With `synchronous=FULL` that is one fsync for the whole group instead of
/// one per operation, and the guarantee stays: nobody is answered before their write is durable.
///
/// The groups are a ``Coalescer``'s batches: the caller that finds no group in flight writes the next one (at most
/// `maxGroupSize` operations, oldest first), with no task spawned. A group is handed to GRDB's writer queue through a
/// callback, so cancelling the leading task (a connection that closes, a graceful shutdown) neither aborts the group
/// nor fails the writes queued behind it.
final class GroupCommit: Sendable {
    private typealias Operation = @Sendable (Database) throws -> any Sendable

    private let writer: any DatabaseWriter
    private let groups: Coalescer<Operation, Result<any Sendable, any Error>>
    /// The most operations in one transaction (bounds how long one group holds the writer).
    var maxGroupSize: Int { groups.maxBatch }
    /// Told of each transaction: its number of operations and how long it took (metrics, tests).
    let commits: CommitObserver
    /// The change stamp the group's statements share, persisted in the group's transaction (ADR 0017).
    let clock: ChangeClock

    init(
        writer: any DatabaseWriter,
        maxGroupSize: Int = 256,
        commits: CommitObserver = CommitObserver(),
        clock: ChangeClock = ChangeClock()
    ) {
        self.writer = writer
        self.groups = Coalescer(maxBatch: maxGroupSize)
        self.commits = commits
        self.clock = clock
    }

    /// Operations waiting for a group (tests).
    var queuedCount: Int { groups.queuedCount }

    /// Runs `operation` in a savepoint of the next group transaction; returns its result once that has committed.
    /// `queued` is called once the operation has its place in the queue: operations queued later run after it.
    func write<T: Sendable>(
        queued: (@Sendable () -> Void)? = nil,
        _ operation: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let result = await groups.submit({ db in try operation(db) }, queued: queued) { group in
            let started = ContinuousClock.now
            let results = await commit(group)
            commits.record(operations: group.count, duration: ContinuousClock.now - started)
            return results
        }
        return try result.get() as! T
    }

    /// One transaction for `group`, run on GRDB's writer queue whatever happens to the calling task.
    private func commit(_ group: [Operation]) async -> [Result<any Sendable, any Error>] {
        guard !group.isEmpty else { return [] }
        let clock = self.clock
        return await withCheckedContinuation { continuation in
            writer.asyncWrite({ db in
                let results = group.map { operation in
                    Result { () throws -> any Sendable in
                        var value: (any Sendable)?
                        try db.inSavepoint {
                            value = try operation(db)
                            return .commit
                        }
                        return value!
                    }
                }
                try clock.persist(db)
                return results
            }) { _, outcome in
                if case .success = outcome { clock.finish(committed: true) } else { clock.finish(committed: false) }
                switch outcome {
                case .success(let results): continuation.resume(returning: results)
                // The transaction itself failed (its commit included): nothing of this group is durable.
                case .failure(let error): continuation.resume(returning: group.map { _ in .failure(error) })
                }
            }
        }
    }
}
