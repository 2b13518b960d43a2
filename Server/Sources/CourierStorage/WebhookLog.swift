// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Where an endpoint is in the event log (ADR 0030): the order key of the last event it was handed, its delivery made
/// or parked. Events are ordered by the change stamp of the transaction that wrote them, then by position; every
/// event below the store's change cursor is committed, so an endpoint reads its log up to there and skips nothing.
public struct WebhookCursor: Hashable, Sendable, Comparable {
    public let stamp: Int64
    public let position: Int64

    public init(stamp: Int64, position: Int64) {
        self.stamp = stamp
        self.position = position
    }

    public static func < (lhs: WebhookCursor, rhs: WebhookCursor) -> Bool {
        (lhs.stamp, lhs.position) < (rhs.stamp, rhs.position)
    }
}

/// An endpoint whose stream a node leased, as it is now (its filter, its secrets), and where its cursor is.
public struct WebhookStream: Hashable, Sendable {
    public let endpoint: WebhookEndpoint
    public let cursor: WebhookCursor

    public init(endpoint: WebhookEndpoint, cursor: WebhookCursor) {
        self.endpoint = endpoint
        self.cursor = cursor
    }
}

/// An event as the log keeps it, once for every endpoint.
public struct WebhookEvent: Hashable, Sendable {
    /// Its place in the log; the delivery's `seq` in the deliveries API.
    public let position: Int64
    /// The change stamp of the transaction that wrote it.
    public let stamp: Int64
    public let id: String
    public let type: WebhookEventType
    /// The queue it goes out in: its conversation, or the conversation's push queue (`message.undelivered`).
    public let conversation: ConversationID
    public let createdAt: Timestamp
    public let payload: String

    public init(
        position: Int64,
        stamp: Int64,
        id: String,
        type: WebhookEventType,
        conversation: ConversationID,
        createdAt: Timestamp,
        payload: String
    ) {
        self.position = position
        self.stamp = stamp
        self.id = id
        self.type = type
        self.conversation = conversation
        self.createdAt = createdAt
        self.payload = payload
    }

    public var cursor: WebhookCursor { WebhookCursor(stamp: stamp, position: position) }

    /// The event as a delivery not yet attempted (what an attempt takes).
    public var delivery: WebhookDelivery {
        WebhookDelivery(
            seq: position, position: position, endpointID: "", eventID: id, type: type, conversation: conversation,
            createdAt: createdAt, payload: payload, state: .pending, attempts: 0, nextAttemptAt: createdAt,
            expiresAt: nil, lastStatus: nil, lastError: nil, deliveredAt: nil
        )
    }
}

/// An event the stream did not deliver, kept as a delivery of its own: it failed (retried later, or failed for good),
/// it waits behind one of its conversation that did, or it waits for its moment (`message.undelivered`).
public struct WebhookParking: Hashable, Sendable {
    public let event: WebhookEvent
    public let state: WebhookDelivery.State
    public let attempts: Int
    public let nextAttemptAt: Timestamp
    public let lastStatus: Int?
    public let lastError: String?

    public init(
        event: WebhookEvent,
        state: WebhookDelivery.State = .pending,
        attempts: Int = 0,
        nextAttemptAt: Timestamp,
        lastStatus: Int? = nil,
        lastError: String? = nil
    ) {
        self.event = event
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastStatus = lastStatus
        self.lastError = lastError
    }
}

extension WebhookEndpoint {
    /// Whether it receives events of `type`: `*` is every type but `message.undelivered`.
    public func wants(_ type: WebhookEventType) -> Bool {
        guard let events else { return type != .messageUndelivered }
        return events.contains(type)
    }
}
