// Courier — Apache-2.0
internal import NIOConcurrencyHelpers

/// A value guarded by a lock, for the server's shared state: a pthread mutex (NIO's `NIOLockedValueBox`) rather than
/// `Synchronization.Mutex`. On Linux `Mutex` is built on futexes that ThreadSanitizer does not observe, so every
/// hand-off through one reads as a data race in `swift test --sanitize=thread`, which CI runs (ADR 0011).
package final class Locked<Value: Sendable>: Sendable {
    private let box: NIOLockedValueBox<Value>

    package init(_ value: Value) { box = NIOLockedValueBox(value) }

    /// Runs `body` with the lock held. `body` must not await, resume continuations or call user code.
    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try box.withLockedValue(body)
    }
}
