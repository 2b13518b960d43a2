// Courier — Apache-2.0

/// The `connect` ack: who the server says you are, and the limits it enforces.
public struct ConnectAck: Hashable, Sendable, Codable {
    public let account: AccountID
    public let device: DeviceID
    public let serverTime: Timestamp
    public let limits: ServerLimits
    /// Who decides whether reads are shared with peers (the server's configuration).
    public let readReceiptPolicy: ReadReceiptPolicy
    public init(
        account: AccountID,
        device: DeviceID,
        serverTime: Timestamp,
        limits: ServerLimits,
        readReceiptPolicy: ReadReceiptPolicy = .userChoice
    ) {
        self.account = account
        self.device = device
        self.serverTime = serverTime
        self.limits = limits
        self.readReceiptPolicy = readReceiptPolicy
    }
}

/// The `send` ack, sent only after the message is durable. `duplicate` is true when `(sender, clientId)` was
/// already stored; `message` is then the original.
public struct SendAck: Hashable, Sendable, Codable {
    public let message: WireMessage
    public let duplicate: Bool
    public init(message: WireMessage, duplicate: Bool) {
        self.message = message
        self.duplicate = duplicate
    }
}

/// The `sync` ack: the state of every conversation of the account — or, for a request with `since`, of those that
/// changed since — with unread counts on the page that completes the sync, and the next page of missed messages in
/// `(conversation, seq)` order. When `hasMore` is true, sync again with `since` set to this ack's `since`.
public struct SyncAck: Hashable, Sendable, Codable {
    public let conversations: [ConversationState]
    public let messages: [WireMessage]
    public let hasMore: Bool
    /// The account's change cursor (ADR 0017), opaque: send it as the next request's `since`. With `hasMore` it
    /// continues this sync; on the page that completes it, keep it (with what the sync brought) and send it on the
    /// next reconnect, which then costs what changed meanwhile. Absent from servers before ADR 0017.
    public let since: String?
    public init(conversations: [ConversationState], messages: [WireMessage], hasMore: Bool, since: String? = nil) {
        self.conversations = conversations
        self.messages = messages
        self.hasMore = hasMore
        self.since = since
    }
}

/// The `history` ack: messages in ascending seq order, all below the request's `before`.
public struct HistoryAck: Hashable, Sendable, Codable {
    public let messages: [WireMessage]
    /// Whether older messages exist.
    public let hasMore: Bool
    public init(messages: [WireMessage], hasMore: Bool) {
        self.messages = messages
        self.hasMore = hasMore
    }
}

/// The `deliver` ack: the caller's delivery watermark after the receipt (unchanged when the receipt was stale).
public struct DeliverAck: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let watermark: Watermark
    public init(conversation: ConversationID, watermark: Watermark) {
        self.conversation = conversation
        self.watermark = watermark
    }
}

/// The `pushToken` ack: whether the device now has a token (`false` after unregistering).
public struct PushTokenAck: Hashable, Sendable, Codable {
    public let registered: Bool
    public init(registered: Bool) { self.registered = registered }
}

/// The `ping` ack.
public struct PingAck: Hashable, Sendable, Codable {
    public let serverTime: Timestamp
    public init(serverTime: Timestamp) { self.serverTime = serverTime }
}
