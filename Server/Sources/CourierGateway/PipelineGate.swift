// Courier — Apache-2.0
internal import CourierStorage

/// A one-shot signal that a request waits on without polling: a send's place in the store's commit order, which the
/// send after it into the same conversation waits for (``SessionStateMachine``). Opened from whichever thread learns
/// it (the store's, as the append is queued), so the next send starts without a trip through the event loop.
final class PipelineGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    var isOpen: Bool { state.withLock { $0.open } }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        guard !isOpen else { return }
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
