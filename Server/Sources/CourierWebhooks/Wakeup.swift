// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire

/// A signal that is remembered until someone waits for it (one waiter at a time); a cancelled wait returns.
final class Wakeup: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Locked(State())  // not `Mutex`: ThreadSanitizer sees this one's hand-offs

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.signalled || Task.isCancelled {
                        state.signalled = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

extension Wakeup {
    /// Returns at whichever comes first: a signal or `interval`.
    func wait(atMost interval: Duration) async {
        await withTaskGroup(of: Void.self) { waits in
            waits.addTask { await self.wait() }
            waits.addTask { try? await Task.sleep(for: interval) }
            await waits.next()
            waits.cancelAll()
        }
    }
}

/// Runs `body` until it finishes or `deadline` (milliseconds, on `now`'s clock) comes, whichever is first; at the
/// deadline `body` is cancelled and what it answers then is taken.
func untilDeadline<T: Sendable>(
    _ deadline: Int64,
    now: @escaping @Sendable () -> Timestamp,
    _ body: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T?.self) { race -> T? in
        race.addTask { await body() }
        race.addTask {
            try? await Task.sleep(for: .milliseconds(max(0, deadline - now().rawValue)))
            return nil
        }
        var result: T?
        if let first = await race.next(), let finished = first { result = finished }
        race.cancelAll()
        for await late in race { if let late { result = late } }
        return result
    }
}

