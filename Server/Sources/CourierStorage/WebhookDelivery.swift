// Courier — Apache-2.0
public import CourierDomain
public import CourierWire
internal import Foundation
#if canImport(Glibc)
internal import Glibc
#endif

/// One event on its way to one endpoint.
public struct WebhookDelivery: Hashable, Sendable {
    public enum State: String, Hashable, Sendable, Codable {
        case pending, delivered, failed
    }
    /// Its row (what an attempt's outcome names).
    public let seq: Int64
    /// Its event's place in the log (ADR 0030): what the deliveries API calls `seq`. A delivery recorded before the log
    /// existed has its row's number.
    public let position: Int64
    public let endpointID: String
    public let eventID: String
    public let type: WebhookEventType
    public let conversation: ConversationID
    public let createdAt: Timestamp
    public let payload: String
    public let state: State
    public let attempts: Int
    public let nextAttemptAt: Timestamp
    /// Retries stop after this time (`nil`: the server's retry period after `createdAt`); the delivery is then
    /// failed, and retryable through the API.
    public let expiresAt: Timestamp?
    public let lastStatus: Int?
    public let lastError: String?
    public let deliveredAt: Timestamp?

    public init(
        seq: Int64,
        position: Int64,
        endpointID: String,
        eventID: String,
        type: WebhookEventType,
        conversation: ConversationID,
        createdAt: Timestamp,
        payload: String,
        state: State,
        attempts: Int,
        nextAttemptAt: Timestamp,
        expiresAt: Timestamp?,
        lastStatus: Int?,
        lastError: String?,
        deliveredAt: Timestamp?
    ) {
        self.seq = seq
        self.position = position
        self.endpointID = endpointID
        self.eventID = eventID
        self.type = type
        self.conversation = conversation
        self.createdAt = createdAt
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.expiresAt = expiresAt
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.deliveredAt = deliveredAt
    }
}

/// The outcome of one delivery attempt.
public struct WebhookAttempt: Hashable, Sendable {
    public enum Outcome: Hashable, Sendable {
        case delivered
        /// Try again at this time.
        case retry(at: Timestamp)
        /// The retry period is over.
        case failed
        /// Not attempted yet, on purpose: due again at this time, its attempt count unchanged (a
        /// `message.undelivered` event waits until its message is a moment old).
        case deferred(until: Timestamp)
    }
    public let seq: Int64
    public let outcome: Outcome
    public let status: Int?
    public let error: String?
    public let at: Timestamp

    public init(seq: Int64, outcome: Outcome, status: Int?, error: String?, at: Timestamp) {
        self.seq = seq
        self.outcome = outcome
        self.status = status
        self.error = error
        self.at = at
    }
}

/// When to try a failed delivery again: exponential from 5 s, capped at an hour, with full jitter, until the retry
/// period (24 h by default) is over.
public struct WebhookRetryPolicy: Hashable, Sendable {
    public let period: Duration
    public let initial: Duration
    public let maximum: Duration

    public init(period: Duration = .seconds(86_400), initial: Duration = .seconds(5), maximum: Duration = .seconds(3600)) {
        self.period = period
        self.initial = initial
        self.maximum = maximum
    }

    /// The next attempt after `attempts` failed ones, or `nil` once past `expiresAt`.
    public func nextAttempt(
        after attempts: Int,
        now: Timestamp,
        expiresAt: Timestamp,
        random: Double = jitter()
    ) -> Timestamp? {
        let base = Self.seconds(initial) * pow(2, Double(min(max(0, attempts - 1), 40)))
        let delay = min(base, Self.seconds(maximum)) * random
        let next = Timestamp(milliseconds: now.rawValue + Int64(delay * 1000))
        return next <= expiresAt ? next : nil
    }

    /// The factor a backoff is drawn with: between half and all of it, so that requests that failed together do not
    /// all come due at once (the deliveries of one request share it).
    public static func jitter() -> Double { Double.random(in: 0.5...1) }

    public func expiry(from now: Timestamp) -> Timestamp {
        Timestamp(milliseconds: now.rawValue + Int64(Self.seconds(period) * 1000))
    }

    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
