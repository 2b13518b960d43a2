// Courier — Apache-2.0

/// Tasks waiting for a result under a key (a request id, a client message id). A result that arrives before its
/// waiters is kept until each waiter registered for it has taken it; several waiters may wait for one key (two sends
/// with one client id) and each gets the result; cancelling a waiter removes only that waiter.
final class Waiters<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Continuation = CheckedContinuation<Value, any Error>
    private enum Slot {
        /// `registered` waiters expect a result; those in `waiting` are suspended.
        case waiting(registered: Int, waiting: [Int: Continuation])
        /// The result, for the `remaining` registered waiters that have not taken it yet.
        case done(Result<Value, any Error>, remaining: Int)
    }
    private struct State {
        var slots: [Key: Slot] = [:]
        var closedWith: (any Error)?
        var nextToken = 0
    }
    private let state = Locked(State())

    /// Reserves `key` for one more waiter, so that a result arriving before ``wait(for:)`` is kept for it.
    func register(_ key: Key) {
        state.withLock { state in
            switch state.slots[key] {
            case nil: state.slots[key] = .waiting(registered: 1, waiting: [:])
            case .waiting(let registered, let waiting): state.slots[key] = .waiting(registered: registered + 1, waiting: waiting)
            case .done(let result, let remaining): state.slots[key] = .done(result, remaining: remaining + 1)
            }
        }
    }

    /// Waits for the result of `key`, as one of the waiters ``register(_:)`` counted (registering if it did not).
    func wait(for key: Key) async throws -> Value {
        let token = state.withLock { state -> Int in
            defer { state.nextToken += 1 }
            if state.slots[key] == nil { state.slots[key] = .waiting(registered: 1, waiting: [:]) }
            return state.nextToken
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Continuation) in
                let ready: Result<Value, any Error>? = state.withLock { state in
                    if case .done(let result, _) = state.slots[key] {
                        Self.take(key, &state)
                        return result
                    }
                    if let error = state.closedWith {
                        Self.take(key, &state)
                        return .failure(error)
                    }
                    if Task.isCancelled {
                        Self.take(key, &state)
                        return .failure(CancellationError())
                    }
                    if case .waiting(let registered, var waiting) = state.slots[key] {
                        waiting[token] = continuation
                        state.slots[key] = .waiting(registered: registered, waiting: waiting)
                    }
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> Continuation? in
                guard case .waiting(let registered, var waiting) = state.slots[key],
                    let continuation = waiting.removeValue(forKey: token)
                else { return nil }
                state.slots[key] = .waiting(registered: registered, waiting: waiting)
                Self.take(key, &state)
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Waits for the result of `key` for at most `timeout`.
    ///
    /// - Throws: ``CourierError/timedOut`` when `clock` passes `timeout` first (the waiter is then removed), or the
    ///   result's error.
    func wait(for key: Key, timeout: Duration, clock: any Clock<Duration>) async throws -> Value {
        try await withTimeout(timeout, clock: clock) { try await self.wait(for: key) }
    }

    /// Delivers a result to every waiter of `key`; ignored when nobody registered `key`.
    func resolve(_ key: Key, with result: Result<Value, any Error>) {
        let continuations = state.withLock { state -> [Continuation] in
            guard case .waiting(let registered, let waiting) = state.slots[key] else { return [] }
            let remaining = registered - waiting.count
            state.slots[key] = remaining > 0 ? .done(result, remaining: remaining) : nil
            return Array(waiting.values)
        }
        for continuation in continuations { continuation.resume(with: result) }
    }

    /// Drops one registration of `key` that will never wait (its caller failed before waiting).
    func forget(_ key: Key) {
        state.withLock { Self.take(key, &$0) }
    }

    /// Forgets `key` and fails its waiters with `CancellationError` (a request that will never be answered).
    func cancel(_ key: Key) {
        let continuations = state.withLock { state -> [Continuation] in
            defer { state.slots[key] = nil }
            if case .waiting(_, let waiting) = state.slots[key] { return Array(waiting.values) }
            return []
        }
        for continuation in continuations { continuation.resume(throwing: CancellationError()) }
    }

    /// Fails every waiter with `error`, and every later wait at once.
    func failAll(with error: any Error) {
        let continuations = state.withLock { state -> [Continuation] in
            let waiting = state.slots.values.flatMap { slot -> [Continuation] in
                if case .waiting(_, let waiting) = slot { return Array(waiting.values) }
                return []
            }
            state.slots = [:]
            state.closedWith = error
            return waiting
        }
        for continuation in continuations { continuation.resume(throwing: error) }
    }

    /// One registered waiter took its answer (or gave up) without suspending.
    private static func take(_ key: Key, _ state: inout State) {
        switch state.slots[key] {
        case .done(let result, let remaining): state.slots[key] = remaining > 1 ? .done(result, remaining: remaining - 1) : nil
        case .waiting(let registered, let waiting):
            state.slots[key] = registered > 1 || !waiting.isEmpty ? .waiting(registered: registered - 1, waiting: waiting) : nil
        case nil: break
        }
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
