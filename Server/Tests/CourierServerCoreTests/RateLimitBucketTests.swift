// Courier — Apache-2.0
import CourierWire
@testable import CourierServerCore
import Testing

/// The token bucket behind `rate.limited` (ADR 0047), on a clock the test moves.
@Suite("Rate limit buckets")
struct RateLimitBucketTests {
    let start = ContinuousClock.now

    @Test("five seconds' worth at once, then a wait of one token; refused until then even as tokens come back")
    func bucket() {
        var bucket = TokenBucket(perSecond: 2, now: start)
        for _ in 0..<10 { #expect(bucket.take(at: start) == nil) }
        #expect(bucket.take(at: start) == .milliseconds(500))
        // Blocked until the time it gave, although a quarter of a token came back meanwhile.
        #expect(bucket.take(at: start + .milliseconds(250)) == .milliseconds(250))
        #expect(bucket.take(at: start + .milliseconds(500)) == nil)
        #expect(bucket.take(at: start + .milliseconds(500)) == .milliseconds(500))
        #expect(!bucket.isIdle(at: start + .seconds(1)))
        #expect(bucket.isIdle(at: start + .seconds(6)))
    }

    @Test("an account's bucket is shared by its sends; idle accounts are forgotten past the bound, busy ones kept")
    func accounts() {
        let limiter = RateLimiter<AccountID>(perSecond: 1)
        for _ in 0..<5 { #expect(limiter.take("alice", at: start) == nil) }
        #expect(limiter.take("alice", at: start) != nil)
        for index in 0..<RateLimiter<AccountID>.pruneAbove { _ = limiter.take(AccountID(rawValue: "a\(index)"), at: start) }
        #expect(limiter.count == RateLimiter<AccountID>.pruneAbove + 1)
        // Six seconds later every bucket is full again, alice's (blocked for a second) too: all are forgotten.
        #expect(limiter.take("bob", at: start + .seconds(6)) == nil)
        #expect(limiter.count == 1)
        #expect(limiter.take("bob", at: start + .seconds(6)) == nil)
    }
}
