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
/// No task is spawned. The caller that finds no group in flight leads: it writes one group (at most `maxGroupSize`
/// operations, oldest first, its own among them), answers it, and hands the lead to the oldest caller still queued.
/// So every caller waits for at most the groups queued before its own plus its own, however steady the load; and a
/// group is handed to GRDB's writer queue through a callback, so cancelling the leading task (a connection that
/// closes, a graceful shutdown) neither aborts the group nor fails the writes queued behind it.
final class GroupCommit: Sendable {
    private struct State {
        var queue: [Ticket] = []
        var leaderActive = false
    }

    private let writer: any DatabaseWriter
    private let state = Locked(State())
    /// The most operations in one transaction (bounds how long one group holds the writer).
    let maxGroupSize: Int
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
        self.maxGroupSize = maxGroupSize
        self.commits = commits
        self.clock = clock
    }

    /// Operations waiting for a group (tests).
    var queuedCount: Int { state.withLock { $0.queue.count } }

    /// Runs `operation` in a savepoint of the next group transaction; returns its result once that has committed.
    /// `queued` is called once the operation has its place in the queue: operations queued later run after it.
    func write<T: Sendable>(
        queued: (@Sendable () -> Void)? = nil,
        _ operation: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let ticket = Ticket { db in try operation(db) }
        let leads = state.withLock { state -> Bool in
            state.queue.append(ticket)
            guard !state.leaderActive else { return false }
            state.leaderActive = true
            return true
        }
        queued?()
        if leads { await writeNextGroup() }
        while true {
            switch await ticket.outcome() {
            case .done(let result): return try result.get() as! T
            case .lead: await writeNextGroup()
            }
        }
    }

    /// Writes the oldest queued operations as one transaction, answers them, then passes the lead on.
    private func writeNextGroup() async {
        let group = state.withLock { state -> [Ticket] in
            let group = Array(state.queue.prefix(maxGroupSize))
            state.queue.removeFirst(group.count)
            return group
        }
        let started = ContinuousClock.now
        let results = await commit(group)
        commits.record(operations: group.count, duration: ContinuousClock.now - started)
        for (ticket, result) in zip(group, results) { ticket.finish(.done(result)) }
        let next = state.withLock { state -> Ticket? in
            guard let next = state.queue.first else {
                state.leaderActive = false
                return nil
            }
            return next
        }
        next?.finish(.lead)
    }

    /// One transaction for `group`, run on GRDB's writer queue whatever happens to the calling task.
    private func commit(_ group: [Ticket]) async -> [Result<any Sendable, any Error>] {
        guard !group.isEmpty else { return [] }
        let clock = self.clock
        return await withCheckedContinuation { continuation in
            writer.asyncWrite({ db in
                let results = group.map { ticket in
                    Result { () throws -> any Sendable in
                        var value: (any Sendable)?
                        try db.inSavepoint {
                            value = try ticket.operation(db)
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

/// One queued operation, and what its caller is told: its answer, or that it leads the next group.
final class Ticket: Sendable {
    enum Outcome: Sendable {
        case done(Result<any Sendable, any Error>)
        case lead
    }

    let operation: @Sendable (Database) throws -> any Sendable
    private let slot = Locked<(Outcome?, CheckedContinuation<Outcome, Never>?)>((nil, nil))

    init(_ operation: @escaping @Sendable (Database) throws -> any Sendable) { self.operation = operation }

    func finish(_ outcome: Outcome) {
        let waiter = slot.withLock { slot -> CheckedContinuation<Outcome, Never>? in
            guard let waiter = slot.1 else {
                slot.0 = outcome
                return nil
            }
            slot.1 = nil
            return waiter
        }
        waiter?.resume(returning: outcome)
    }

    /// The next outcome; each is delivered once.
    func outcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            let ready = slot.withLock { slot -> Outcome? in
                if let outcome = slot.0 {
                    slot.0 = nil
                    return outcome
                }
                slot.1 = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
