// Courier — Apache-2.0

/// Tasks waiting for a result under a key (a request id, a client message id). A result that arrives before its
/// waiter is kept until the waiter comes; cancelling a waiter removes it.
final class Waiters<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private enum Slot {
        case waiting(CheckedContinuation<Value, any Error>?)
        case done(Result<Value, any Error>)
    }
    private struct State {
        var slots: [Key: Slot] = [:]
        var closedWith: (any Error)?
    }
    private let state = Locked(State())

    /// Reserves `key` so that a result arriving before ``wait(for:)`` is kept.
    func register(_ key: Key) {
        state.withLock { state in
            if state.slots[key] == nil { state.slots[key] = .waiting(nil) }
        }
    }

    /// Waits for the result of `key` (registering it if needed).
    func wait(for key: Key) async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let ready: Result<Value, any Error>? = state.withLock { state in
                    if case .done(let result) = state.slots[key] {
                        state.slots[key] = nil
                        return result
                    }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if let error = state.closedWith { return .failure(error) }
                    state.slots[key] = .waiting(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                guard case .waiting(let continuation?) = state.slots[key] else { return nil }
                state.slots[key] = nil
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Waits for the result of `key` for at most `timeout`; on timeout (or any failure) forgets `key`.
    ///
    /// - Throws: ``CourierError/timedOut`` when `clock` passes `timeout` first, or the result's error.
    func wait(for key: Key, timeout: Duration, clock: any Clock<Duration>) async throws -> Value {
        do {
            return try await withTimeout(timeout, clock: clock) { try await self.wait(for: key) }
        } catch {
            cancel(key)
            throw error
        }
    }

    /// Delivers a result to `key`'s waiter; ignored when nobody registered `key`.
    func resolve(_ key: Key, with result: Result<Value, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            switch state.slots[key] {
            case .waiting(let continuation?):
                state.slots[key] = nil
                return continuation
            case .waiting(nil):
                state.slots[key] = .done(result)
                return nil
            case .done, nil:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    /// Forgets `key` (after a timeout).
    func cancel(_ key: Key) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            defer { state.slots[key] = nil }
            if case .waiting(let continuation?) = state.slots[key] { return continuation }
            return nil
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Fails every waiter with `error`; with `permanently`, later waits fail at once too.
    func failAll(with error: any Error, permanently: Bool) {
        let continuations = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            let waiting = state.slots.values.compactMap { slot -> CheckedContinuation<Value, any Error>? in
                if case .waiting(let continuation?) = slot { return continuation }
                return nil
            }
            state.slots = [:]
            if permanently { state.closedWith = error }
            return waiting
        }
        for continuation in continuations { continuation.resume(throwing: error) }
    }
}

/// Runs `operation`, failing with ``CourierError/timedOut`` when `clock` passes `timeout` first.
func withTimeout<T: Sendable>(
    _ timeout: Duration,
    clock: any Clock<Duration>,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await clock.sleep(for: timeout, tolerance: nil)
            throw CourierError.timedOut
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
