// Courier — Apache-2.0
internal import CourierDomain
internal import CourierStorage
package import CourierWire

/// A token bucket: `perSecond` tokens a second, up to five seconds' worth saved up. A request takes one; with
/// none left it is refused, and so is every request until the moment one is back, so that none sent later overtakes
/// one refused before it (a device retries in order).
package struct TokenBucket: Sendable {
    let perSecond: Double
    let burst: Double
    private var tokens: Double
    private var last: ContinuousClock.Instant
    private var blockedUntil: ContinuousClock.Instant?

    /// Seconds' worth of requests a bucket holds when full.
    static let burstSeconds = 5.0

    package init(perSecond: Int, now: ContinuousClock.Instant) {
        self.perSecond = Double(perSecond)
        burst = max(1, Double(perSecond) * Self.burstSeconds)
        tokens = burst
        last = now
    }

    /// `nil` when the request may go (a token is taken); otherwise how long until one may be asked again.
    package mutating func take(at now: ContinuousClock.Instant) -> Duration? {
        if let blockedUntil, now < blockedUntil { return blockedUntil - now }
        tokens = min(burst, tokens + perSecond * ((now - last) / .seconds(1)))
        last = now
        if tokens >= 1 {
            tokens -= 1
            blockedUntil = nil
            return nil
        }
        let wait = Duration.seconds((1 - tokens) / perSecond)
        blockedUntil = now + wait
        return wait
    }

    /// Full again: a bucket no request needed for five seconds can be forgotten.
    func isIdle(at now: ContinuousClock.Instant) -> Bool {
        (blockedUntil.map { now >= $0 } ?? true) && tokens + perSecond * ((now - last) / .seconds(1)) >= burst
    }
}

/// A bucket per key (``TokenBucket``): an account's sends on this node, whichever of its devices sent them; a REST
/// credential's requests.
package final class RateLimiter<Key: Hashable & Sendable>: Sendable {
    let perSecond: Int
    private struct State {
        var buckets: [Key: TokenBucket] = [:]
        /// The count past which idle buckets are forgotten: twice what the last pruning kept (at least
        /// ``pruneAbove``), so that pruning costs O(1) per request on average however many keys are busy.
        var pruneAt = 10_000  // pruneAbove
    }
    private let state = Locked(State())
    /// Keys kept before idle ones are forgotten.
    static var pruneAbove: Int { 10_000 }

    package init(perSecond: Int) { self.perSecond = perSecond }

    /// `nil` when `key` may go now; otherwise how long until it may again. Always `nil` when off (0).
    package func take(_ key: Key, at now: ContinuousClock.Instant) -> Duration? {
        guard perSecond > 0 else { return nil }
        return state.withLock { state in
            if state.buckets.count > state.pruneAt {
                state.buckets = state.buckets.filter { !$0.value.isIdle(at: now) }
                state.pruneAt = max(Self.pruneAbove, state.buckets.count * 2)
            }
            return state.buckets[key, default: TokenBucket(perSecond: perSecond, now: now)].take(at: now)
        }
    }

    /// Keys with a bucket now (tests).
    var count: Int { state.withLock { $0.buckets.count } }
}

/// What a device's request counts against (``TokenBucket``): its sends, its typing indicators, or its other writes. Deliveries are not
/// counted (they follow what the server sends the device, and one moves a watermark over many messages); requests
/// that only read are bounded by the requests in flight.
package enum RateClass {
    case send
    case typing
    case write

    package init?(_ type: FrameType) {
        switch type {
        case .send: self = .send
        case .typing: self = .typing
        case .read, .recall, .edit, .react, .createGroup, .groupChange, .readReceiptSettings, .requestReadReceipts, .pushToken,
            .changeView, .typingSettings, .setAccountProfile:
            self = .write
        default: return nil
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded up (at least 1): what `retryAfterMs` says.
    package var roundedUpMilliseconds: Int {
        let (seconds, attoseconds) = components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return max(1, Int(milliseconds))
    }
}
