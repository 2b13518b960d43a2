// Courier — Apache-2.0
internal import CourierWire

/// Fans events out to every `events()` stream. Registration is synchronous, so no event is lost between creating a
/// stream and iterating it. Buffers are unbounded: the store is the truth and events are never dropped silently, so
/// a consumer that stops reading grows memory.
final class EventBroadcaster: Sendable {
    private let continuations = Locked<[Int: AsyncStream<CourierEvent>.Continuation]>([:])
    private let nextID = Locked(0)

    func stream() -> AsyncStream<CourierEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CourierEvent.self, bufferingPolicy: .unbounded)
        let id = nextID.withLock { value in
            value += 1
            return value
        }
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    private let queues = Locked<[EventQueue]>([])

    /// A queue that is drained to the end even when its consumer's task is cancelled (the delegate pump, so that
    /// `disconnect()` does not drop events delegates have not seen yet). Finish it to end the consumer.
    func makeQueue() -> EventQueue {
        let queue = EventQueue()
        queues.withLock { $0.append(queue) }
        return queue
    }

    func removeQueue(_ queue: EventQueue) {
        queues.withLock { $0.removeAll { $0 === queue } }
        queue.finish()
    }

    func emit(_ event: CourierEvent) {
        // Snapshot under the lock, yield outside it.
        let targets = continuations.withLock { Array($0.values) }
        for continuation in targets { continuation.yield(event) }
        for queue in queues.withLock({ $0 }) { queue.append(event) }
    }

    func emit(_ events: [CourierEvent]) {
        for event in events { emit(event) }
    }
}

/// An unbounded FIFO of events whose `next()` ignores task cancellation and returns `nil` only once finished and
/// drained.
final class EventQueue: Sendable {
    private struct State {
        var events: [CourierEvent] = []
        var waiter: CheckedContinuation<CourierEvent?, Never>?
        var finished = false
    }
    private let state = Locked(State())

    func append(_ event: CourierEvent) {
        let waiter = state.withLock { state -> CheckedContinuation<CourierEvent?, Never>? in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.events.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<CourierEvent?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event; waits (uncancellably) until one arrives or the queue is finished and empty.
    func next() async -> CourierEvent? {
        await withCheckedContinuation { continuation in
            let ready: CourierEvent?? = state.withLock { state in
                if !state.events.isEmpty { return .some(state.events.removeFirst()) }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
