// Courier — Apache-2.0
internal import Foundation

/// The wait ran out before the expected element arrived.
public struct TimedOutWaiting: Error, CustomStringConvertible {
    public let description: String
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// The first element that `transform` maps to a value, waiting at most `timeout` (never sleeps to wait: the
    /// timeout only bounds a wait for an event that should arrive).
    public func first<T: Sendable>(
        timeout: Duration = .seconds(10),
        _ transform: @escaping @Sendable (Element) -> T?
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask {
                for try await element in self {
                    if let value = transform(element) { return value }
                }
                throw TimedOutWaiting(description: "The sequence ended before the expected element.")
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimedOutWaiting(description: "No expected element within \(timeout).")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// The first `count` elements that `transform` maps to values, in order, waiting at most `timeout` overall.
    public func collect<T: Sendable>(
        _ count: Int,
        timeout: Duration = .seconds(30),
        _ transform: @escaping @Sendable (Element) -> T?
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: [T].self) { group in
            group.addTask {
                var values: [T] = []
                guard count > 0 else { return values }
                for try await element in self {
                    if let value = transform(element) { values.append(value) }
                    if values.count == count { return values }
                }
                throw TimedOutWaiting(description: "The sequence ended after \(values.count) of \(count) elements.")
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimedOutWaiting(description: "Fewer than \(count) expected elements within \(timeout).")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }
}
