// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import GRDB

/// Folds the WAL into the database file and truncates it, for recalls: old page images in the WAL would otherwise
/// still hold a recalled body (ADR 0007, ADR 0011 §4).
///
/// - Off the writer's path: checkpoints run on a connection of their own that never waits for a lock. A `TRUNCATE`
///   checkpoint that finds a reader on an old snapshot (or a write in progress) fails at once with `SQLITE_BUSY` and
///   is retried a moment later, so writes go on meanwhile instead of queueing behind a checkpoint that waits.
/// - Shared, with a fair hand-over: callers that arrive while a checkpoint runs wait for the next one, which starts
///   after their commits; the oldest of them leads it. So each caller waits for at most the checkpoint in flight and
///   the next, each bounded by its leader's deadline, however steady the recalls.
/// - Never reported done when it is not: ``purge(within:)`` answers `true` only once a checkpoint that started after
///   the call has truncated the WAL. When none does in time it answers `false` and the purge stays owed:
///   ``runPending(report:)`` (a service of the SQLite backend) retries until one succeeds.
///
/// No task is spawned.
final class WALPurge: Sendable {
    private enum Turn: Sendable {
        /// A checkpoint that started after the caller queued has ended: whether the WAL was truncated.
        case done(Bool)
        /// The caller leads the next checkpoint.
        case lead
    }

    private struct State {
        var running = false
        var waiting: [CheckedContinuation<Turn, Never>] = []
        /// A purge timed out: set until a checkpoint truncates the WAL.
        var pending = false
    }

    private let checkpointer: DatabaseQueue
    private let state = Locked(State())
    private let owed: AsyncStream<Void>
    private let owedContinuation: AsyncStream<Void>.Continuation

    /// - Parameter checkpointer: A connection of its own to the database file (busy mode `immediateError`).
    init(checkpointer: DatabaseQueue) {
        self.checkpointer = checkpointer
        (owed, owedContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Whether a purge is owed (a recalled body may still be in the WAL).
    var isPending: Bool { state.withLock { $0.pending } }

    /// Returns `true` once a checkpoint that started after this call has truncated the WAL, `false` when none could
    /// within `limit` (the purge is then owed, see ``runPending(report:)``).
    func purge(within limit: Duration) async -> Bool {
        let leads = state.withLock { state -> Bool in
            guard !state.running else { return false }
            state.running = true
            return true
        }
        if !leads {
            let turn = await withCheckedContinuation { continuation in
                state.withLock { $0.waiting.append(continuation) }
            }
            if case .done(let truncated) = turn { return truncated }
        }
        return await lead(until: ContinuousClock.now.advanced(by: limit))
    }

    /// Marks a purge owed without trying one (the store could not purge when it opened).
    func owe() {
        state.withLock { $0.pending = true }
        owedContinuation.yield()
    }

    /// Retries an owed purge until it succeeds; runs until cancelled. `report(false)` when a purge became owed,
    /// `report(true)` when it was done.
    func runPending(report: @Sendable (Bool) -> Void) async {
        for await _ in owed where isPending {
            report(false)
            while isPending {
                do { try await Task.sleep(for: .milliseconds(200)) } catch { return }
                if await purge(within: .seconds(1)) { report(true) }
            }
        }
    }

    /// Runs one checkpoint for the callers queued before it started, then passes the lead to the oldest caller that
    /// queued meanwhile (its checkpoint will start after their commits).
    private func lead(until deadline: ContinuousClock.Instant) async -> Bool {
        let covered = state.withLock { state -> [CheckedContinuation<Turn, Never>] in
            defer { state.waiting = [] }
            return state.waiting
        }
        let truncated = await checkpoint(until: deadline)
        for continuation in covered { continuation.resume(returning: .done(truncated)) }
        let next = state.withLock { state -> CheckedContinuation<Turn, Never>? in
            guard !state.waiting.isEmpty else {
                state.running = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume(returning: .lead)
        return truncated
    }

    /// Tries `TRUNCATE` checkpoints until one succeeds or `deadline` passes; records the outcome.
    private func checkpoint(until deadline: ContinuousClock.Instant) async -> Bool {
        var delay = Duration.milliseconds(1)
        while true {
            if await truncate() {
                state.withLock { $0.pending = false }
                return true
            }
            guard ContinuousClock.now.advanced(by: delay) < deadline else { break }
            do { try await Task.sleep(for: delay) } catch { break }
            delay = min(delay * 2, .milliseconds(50))
        }
        owe()
        return false
    }

    /// One `TRUNCATE` checkpoint attempt, synchronously (when the store opens): `true` when it succeeded.
    func truncateNow() throws -> Bool {
        try checkpointer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        return true
    }

    /// One `TRUNCATE` checkpoint attempt: `true` when the whole WAL was folded into the file and truncated.
    private func truncate() async -> Bool {
        do {
            try await checkpointer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
            return true
        } catch {
            // SQLITE_BUSY: a reader on an old snapshot, or a write in progress; the next attempt comes shortly.
            return false
        }
    }
}
