// Courier — Apache-2.0
internal import GRDB
internal import Synchronization

/// Folds the WAL into the database file and truncates it, for recalls: old page images in the WAL would otherwise
/// still hold a recalled body (ADR 0007). A checkpoint costs fsyncs, so concurrent recalls share one — a caller that
/// arrives while a checkpoint runs is covered by the next one, which starts after its commit — and a recall is still
/// answered only once its body is gone from the files.
///
/// No task is spawned: the caller that finds no checkpoint in flight leads, checkpointing until nobody waits.
final class WALPurge: Sendable {
    private struct State {
        var running = false
        var waiting: [CheckedContinuation<Bool, Never>] = []
    }

    private let writer: any DatabaseWriter
    private let state = Mutex(State())

    init(writer: any DatabaseWriter) { self.writer = writer }

    /// Returns once a checkpoint that started after this call has truncated the WAL.
    func purge() async {
        while true {
            let leads = state.withLock { state -> Bool in
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if leads { return await lead() }
            // Wait for the next checkpoint; `false`: the leader finished before this caller queued, so lead.
            let served = await withCheckedContinuation { continuation in
                let queued = state.withLock { state -> Bool in
                    guard state.running else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                if !queued { continuation.resume(returning: false) }
            }
            if served { return }
        }
    }

    private func lead() async {
        await checkpoint()
        while true {
            let batch = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
                let batch = state.waiting
                state.waiting = []
                if batch.isEmpty { state.running = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            await checkpoint()
            for continuation in batch { continuation.resume(returning: true) }
        }
    }

    private func checkpoint() async {
        // A failed checkpoint (e.g. a long reader) leaves the WAL to the next one; the recall itself has committed.
        try? await writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }
}
