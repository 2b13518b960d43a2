// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierWire
import Testing

/// What docs/webhooks.md promises of retries: the wait doubles from 5 s up to an hour, each wait drawn between half
/// and all of it (jitter, so endpoints that failed together do not come back together), and nothing is tried past
/// the retry period (24 h).
@Suite("Webhook retry policy")
struct WebhookRetryPolicyTests {
    let policy = WebhookRetryPolicy()
    let start = Timestamp(milliseconds: 1_000_000_000_000)

    func delay(after attempts: Int, random: Double) -> Int64? {
        policy.nextAttempt(after: attempts, now: start, expiresAt: policy.expiry(from: start), random: random)
            .map { $0.rawValue - start.rawValue }
    }

    @Test("the wait doubles from 5 seconds to at most an hour, at most the full wait and at least half of it")
    func backoff() {
        let full = (1...14).map { delay(after: $0, random: 1) }
        #expect(full == [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600, 3600].map { Int64($0) * 1000 })
        let half = (1...14).map { delay(after: $0, random: 0.5) }
        #expect(half == full.map { $0.map { $0 / 2 } })
    }

    @Test("the jitter spreads the waits of deliveries that failed together")
    func jitter() {
        // Drawn by the policy itself: 200 deliveries that failed for the third time at the same moment.
        let waits = (0..<200).compactMap { _ in
            policy.nextAttempt(after: 3, now: start, expiresAt: policy.expiry(from: start)).map { $0.rawValue - start.rawValue }
        }
        #expect(waits.count == 200)
        #expect(waits.allSatisfy { (10_000...20_000).contains($0) })
        #expect(Set(waits).count > 50, "waits drawn: \(Set(waits).count) distinct")
    }

    @Test("nothing is tried past the retry period: 33 to 57 attempts in 24 hours, then the delivery is failed")
    func period() {
        let expiresAt = policy.expiry(from: start)
        #expect(expiresAt.rawValue - start.rawValue == 86_400_000)
        for random in [0.5, 1.0] {
            var now = start
            var attempts = 1
            while let next = policy.nextAttempt(after: attempts, now: now, expiresAt: expiresAt, random: random) {
                #expect(next <= expiresAt)
                now = next
                attempts += 1
            }
            // The first ten waits take 85 minutes at full length (5 s doubling to 2,560 s), then an hour each: 33
            // attempts in the day; at half length 43 minutes, then half an hour each: 57.
            #expect(attempts == (random == 1 ? 33 : 57), "\(attempts) attempts at jitter \(random)")
        }
    }
}
