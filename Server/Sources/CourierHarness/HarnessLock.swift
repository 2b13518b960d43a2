// Courier — Apache-2.0
internal import NIOConcurrencyHelpers

/// A value guarded by a pthread mutex (NIO's `NIOLockedValueBox`), for the harness's shared state. Not
/// `Synchronization.Mutex`: on Linux it is built on futexes that ThreadSanitizer does not observe, so a hand-off
/// through one reads as a data race in CI's `--sanitize=thread` step (seen there in `ProtocolClient`: a reply
/// handed from the receiving task to the waiting one under the same lock).
final class HarnessLock<Value>: @unchecked Sendable {
    private let box: NIOLockedValueBox<Value>

    init(_ value: Value) { box = NIOLockedValueBox(value) }

    /// Runs `body` with the lock held.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try box.withLockedValue(body)
    }
}
