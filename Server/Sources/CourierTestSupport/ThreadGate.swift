// Courier — Apache-2.0
internal import CourierStorage
internal import Foundation

/// Blocks a thread (a database operation on the store's thread, not a Swift task) until opened: a test holds the
/// writer with it while it sets up what must wait behind the writer.
public final class ThreadGate: Sendable {
    private let condition = NSCondition()
    /// A pthread mutex (`Locked`), which ThreadSanitizer sees, not `Synchronization.Mutex`.
    private let state = Locked<(open: Bool, waiting: Bool)>((false, false))

    public init() {}

    /// Whether a thread waits at the gate.
    public var isWaiting: Bool { state.withLock { $0.waiting } }

    public func wait() {
        condition.lock()
        state.withLock { $0.waiting = true }
        while !state.withLock({ $0.open }) { condition.wait() }
        condition.unlock()
    }

    public func open() {
        condition.lock()
        state.withLock { $0.open = true }
        condition.broadcast()
        condition.unlock()
    }
}
