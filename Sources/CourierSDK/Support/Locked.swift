// Courier — Apache-2.0
internal import Foundation

/// A value guarded by a lock. The SDK floor (iOS 16 / macOS 13) predates `Synchronization.Mutex`.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` goes through `lock` (an NSLock).
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with the lock held. `body` must not await, call user code, or resume continuations.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
