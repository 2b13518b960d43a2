// Courier — Apache-2.0

/// Fans events out to every `events()` stream. Registration is synchronous, so no event is lost between creating a
/// stream and iterating it. Buffers are unbounded: the store is the truth and events are never dropped silently, so
/// a consumer that stops reading grows memory.
final class EventBroadcaster: Sendable {
    private let continuations = Locked<[Int: AsyncStream<CourierEvent>.Continuation]>([:])
    private let nextID = Locked(0)

    func stream() -> AsyncStream<CourierEvent> { makeStream().stream }

    /// A stream and a way to end it after its buffered events (for the delegate pump).
    func makeStream() -> (stream: AsyncStream<CourierEvent>, finish: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream.makeStream(of: CourierEvent.self, bufferingPolicy: .unbounded)
        let id = nextID.withLock { value in
            value += 1
            return value
        }
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        return (stream, { continuation.finish() })
    }

    func emit(_ event: CourierEvent) {
        // Snapshot under the lock, yield outside it.
        let targets = continuations.withLock { Array($0.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func emit(_ events: [CourierEvent]) {
        for event in events { emit(event) }
    }
}
