// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import Foundation

/// Counts failed `connect`s per client address over a sliding minute; an address past the limit is refused with
/// `auth.throttled` (before its token is even checked) until its count falls. Bounded: at most `maxAddresses` are
/// tracked, the stalest dropped first, so a flood of addresses costs a fixed amount of memory. The address is the
/// client's: the TCP peer's, or behind a trusted proxy the one its `X-Forwarded-For` names
/// (``TrustedProxies``) — so one client's bad tokens never refuse another's connects. Not per account: anyone could
/// then lock any account out with tokens it cannot sign, and a signed token is not guessed one try at a time.
package final class ConnectThrottle: Sendable {
    private struct Window {
        var minute: Int64
        var failures: Int
        var previous: Int
    }

    private let windows = Locked<[String: Window]>([:])
    private let limit: Int
    private let maxAddresses: Int
    private let now: @Sendable () -> Date

    package init(limitPerMinute: Int, maxAddresses: Int = 10_000, now: @escaping @Sendable () -> Date = { Date() }) {
        self.limit = limitPerMinute
        self.maxAddresses = maxAddresses
        self.now = now
    }

    /// Whether `address` is past its limit: failures in the current minute plus the previous minute's, weighted by
    /// how much of it still overlaps the last 60 s.
    package func isThrottled(_ address: String) -> Bool {
        guard limit > 0 else { return false }
        let (minute, fraction) = clock()
        return windows.withLock { windows in
            guard let window = windows[address] else { return false }
            return Self.estimate(window, minute: minute, fraction: fraction) >= Double(limit)
        }
    }

    /// Counts a failure of `address`; returns its failures in the current minute (0 when the limit is off).
    @discardableResult
    package func recordFailure(_ address: String) -> Int {
        guard limit > 0 else { return 0 }
        let (minute, _) = clock()
        return windows.withLock { windows in
            var window = windows[address] ?? Window(minute: minute, failures: 0, previous: 0)
            if window.minute != minute {
                window.previous = window.minute == minute - 1 ? window.failures : 0
                window.failures = 0
                window.minute = minute
            }
            window.failures += 1
            windows[address] = window
            if windows.count > maxAddresses {
                // Drop a tenth: the stalest addresses first, then those with the fewest failures — so a flood of
                // addresses never resets the counts of the ones that matter.
                let doomed = windows.filter { $0.key != address }
                    .sorted { ($0.value.minute, $0.value.failures) < ($1.value.minute, $1.value.failures) }
                    .prefix(maxAddresses / 10 + 1)
                for (key, _) in doomed { windows[key] = nil }
            }
            return window.failures
        }
    }

    /// The failures of an address in a minute that are logged one by one (the rest are summed up in the line that
    /// says the address is throttled), so that a flood of bad tokens cannot flood the log.
    package static let loggedFailuresPerMinute = 5

    /// The configured limit per minute (0: off).
    package var limitPerMinute: Int { limit }

    /// Addresses tracked now.
    var trackedAddresses: Int { windows.withLock { $0.count } }

    private func clock() -> (minute: Int64, fraction: Double) {
        let seconds = now().timeIntervalSince1970
        return (Int64(seconds / 60), seconds.truncatingRemainder(dividingBy: 60) / 60)
    }

    private static func estimate(_ window: Window, minute: Int64, fraction: Double) -> Double {
        switch minute - window.minute {
        case 0: Double(window.failures) + Double(window.previous) * (1 - fraction)
        case 1: Double(window.failures) * (1 - fraction)
        default: 0
        }
    }
}
