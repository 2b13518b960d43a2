// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain

/// Carries a value out of a handler closure that cannot return it.
final class ResultBox<T: Sendable>: Sendable {
    private let value = Locked<T?>(nil)
    func set(_ newValue: T) { value.withLock { $0 = newValue } }
    func get() throws -> T {
        guard let value = value.withLock({ $0 }) else { throw ResultBoxError.empty }
        return value
    }
}

enum ResultBoxError: Error { case empty }
