// Courier — Apache-2.0
internal import CourierStorage
internal import GRDB

/// Folds the WAL into the database file and truncates it, for recalls: old page images in the WAL would otherwise
/// still hold a recalled body (ADR 0007).
///
/// - Off the writer's path: checkpoints run on a connection of their own that never waits for a lock. A `TRUNCATE`
///   checkpoint that finds a reader on an old snapshot (or a write in progress) fails at once with `SQLITE_BUSY` and
///   is retried a moment later, so writes go on meanwhile instead of queueing behind a checkpoint that waits.
/// - Shared: a caller that arrives while a checkpoint runs is covered by the next one, which starts after its
///   commit; concurrent recalls share one.
/// - Never reported done when it is not: ``purge(within:)`` answers `true` only once a checkpoint that started after
///   the call has truncated the WAL. When none does in time it answers `false` and the purge stays owed:
///   ``runPending(report:)`` (a service of the SQLite backend) retries until one succeeds, and the store purges when
///   it next opens.
///
/// No task is spawned: the caller that finds no checkpoint in flight leads, checkpointing until nobody waits.
final class WALPurge: Sendable {
    private struct State {
        var running = false
        var waiting: [CheckedContinuation<Bool, Never>] = []
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
        let deadline = ContinuousClock.now.advanced(by: limit)
        while true {
            let leads = state.withLock { state -> Bool in
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if leads { return await lead(until: deadline) }
            // Wait for the next checkpoint; `nil`: the leader finished before this caller queued, so lead.
            let served = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let queued = state.withLock { state -> Bool in
                    guard state.running else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                if !queued { continuation.resume(returning: false) }
            }
            if served { return !isPending }
        }
    }

    /// Retries an owed purge until it succeeds; runs until cancelled. `report(false)` when a purge became owed,
    /// `report(true)` when it was done.
    func runPending(report: @Sendable (Bool) -> Void) async {
        for await _ in owed {
            report(false)
            while isPending {
                do { try await Task.sleep(for: .milliseconds(200)) } catch { return }
                if await purge(within: .seconds(1)) { report(true) }
            }
        }
    }

    private func lead(until deadline: ContinuousClock.Instant) async -> Bool {
        var truncated = await checkpoint(until: deadline)
        while true {
            let batch = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
                let batch = state.waiting
                state.waiting = []
                if batch.isEmpty { state.running = false }
                return batch
            }
            guard !batch.isEmpty else { return truncated }
            truncated = await checkpoint(until: deadline)
            for continuation in batch { continuation.resume(returning: true) }
        }
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
        state.withLock { $0.pending = true }
        owedContinuation.yield()
        return false
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
