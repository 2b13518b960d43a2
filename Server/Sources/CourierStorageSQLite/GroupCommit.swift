// Courier — Apache-2.0
internal import GRDB
internal import Synchronization

/// Group commit: write operations that arrive while a transaction is being written are run together in the next
/// transaction — each in its own savepoint, so one failing operation rolls back only itself — and all of them are
/// answered after that transaction commits. With `synchronous=FULL` that is one fsync for the whole group instead of
/// one per operation, and the guarantee stays: nobody is answered before their write is durable.
///
/// No task is spawned: the caller that finds no group in flight becomes the leader and writes groups (awaiting
/// GRDB's writer, never blocking a thread) until the queue is empty; the others wait for their ticket.
final class GroupCommit: Sendable {
    private struct State {
        var queue: [Ticket] = []
        var leaderActive = false
    }

    private let writer: any DatabaseWriter
    private let state = Mutex(State())
    /// The most operations in one transaction (bounds how long one group holds the writer).
    private let maxGroupSize: Int

    init(writer: any DatabaseWriter, maxGroupSize: Int = 256) {
        self.writer = writer
        self.maxGroupSize = maxGroupSize
    }

    /// Runs `operation` in a savepoint of the next group transaction; returns its result once that has committed.
    func write<T: Sendable>(_ operation: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let ticket = Ticket { db in try operation(db) }
        let leads = state.withLock { state -> Bool in
            state.queue.append(ticket)
            guard !state.leaderActive else { return false }
            state.leaderActive = true
            return true
        }
        if leads { await drain() }
        return try await ticket.value() as! T
    }

    private func drain() async {
        while true {
            let group = state.withLock { state -> [Ticket] in
                let group = Array(state.queue.prefix(maxGroupSize))
                state.queue.removeFirst(group.count)
                if group.isEmpty { state.leaderActive = false }
                return group
            }
            guard !group.isEmpty else { return }
            let results: [Result<any Sendable, any Error>]
            do {
                results = try await writer.write { db in
                    group.map { ticket in
                        Result { () throws -> any Sendable in
                            var value: (any Sendable)?
                            try db.inSavepoint {
                                value = try ticket.operation(db)
                                return .commit
                            }
                            return value!
                        }
                    }
                }
            } catch {
                // The transaction itself failed: nothing of this group is durable.
                results = group.map { _ in .failure(error) }
            }
            for (ticket, result) in zip(group, results) { ticket.complete(result) }
        }
    }
}

/// One queued operation and its answer.
final class Ticket: Sendable {
    let operation: @Sendable (Database) throws -> any Sendable
    private let slot = Mutex<(Result<any Sendable, any Error>?, CheckedContinuation<any Sendable, any Error>?)>(
        (nil, nil)
    )

    init(_ operation: @escaping @Sendable (Database) throws -> any Sendable) { self.operation = operation }

    func complete(_ result: Result<any Sendable, any Error>) {
        let waiter = slot.withLock { slot -> CheckedContinuation<any Sendable, any Error>? in
            guard let waiter = slot.1 else {
                slot.0 = result
                return nil
            }
            slot.1 = nil
            return waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> any Sendable {
        try await withCheckedThrowingContinuation { continuation in
            let ready = slot.withLock { slot -> Result<any Sendable, any Error>? in
                if let result = slot.0 { return result }
                slot.1 = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}
