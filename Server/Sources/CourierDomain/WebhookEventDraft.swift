// Courier — Apache-2.0
public import CourierWire

/// An account to notify of a message it has not received, and where.
public struct PushRecipient: Hashable, Sendable, Codable {
    public let account: AccountID
    /// Its devices' push tokens (none when it registered none).
    public let tokens: [PushToken]
    /// The account muted the conversation (ADR 0029): push silently, or not at all (NIM, Agora and RongCloud send
    /// none).
    public let muted: Bool

    enum CodingKeys: String, CodingKey {
        case account, muted
        case tokens = "pushTokens"
    }
    public init(account: AccountID, tokens: [PushToken], muted: Bool = false) {
        self.account = account
        self.tokens = tokens
        self.muted = muted
    }
}

/// What an event reports.
public struct WebhookEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A message was appended (NIM 抄送 of a message, Agora `chat` callback).
    public static let messageCreated = WebhookEventType(rawValue: "message.created")
    /// A member's delivery watermark moved.
    public static let messageDelivered = WebhookEventType(rawValue: "message.delivered")
    /// A member read up to a message (direct), or newly read messages that asked for receipts (group, with counts).
    public static let messageRead = WebhookEventType(rawValue: "message.read")
    /// A message was recalled (NIM 抄送 of a recall, Agora `recall` callback).
    public static let messageRecalled = WebhookEventType(rawValue: "message.recalled")
    /// A message was edited (Agora's message modification callback, Stream `message.updated`): `data.message` is
    /// the edit entry, whose `edit.messageId` names the message and whose `body` and `ext` are the new ones.
    public static let messageEdited = WebhookEventType(rawValue: "message.edited")
    /// A member added a reaction to a message (Agora's reaction callback, Stream `reaction.new`):
    /// `data.reaction` is the `reaction` event, with the message's counts after it.
    public static let reactionAdded = WebhookEventType(rawValue: "reaction.added")
    /// A member removed a reaction (Stream `reaction.deleted`); `data.reaction` as for `reaction.added`.
    public static let reactionRemoved = WebhookEventType(rawValue: "reaction.removed")
    /// A group was created or its membership or roles changed.
    public static let groupChanged = WebhookEventType(rawValue: "group.changed")
    /// An account's profile changed (NIM's user info 抄送, Agora's user attribute callback).
    public static let accountUpdated = WebhookEventType(rawValue: "account.updated")
    /// A sender asked a group for read receipts after sending.
    public static let readReceiptsRequested = WebhookEventType(rawValue: "readReceipts.requested")
    /// Some of a message's recipients (or of a recall's) have it on no device a moment after it was sent: the push
    /// recipe's event (docs/webhooks.md). Not recorded for an endpoint that does not name it (`*` excludes it).
    public static let messageUndelivered = WebhookEventType(rawValue: "message.undelivered")

    /// The types `*` stands for.
    public static let all: [WebhookEventType] = [
        .messageCreated, .messageDelivered, .messageRead, .messageRecalled, .messageEdited, .groupChanged,
        .readReceiptsRequested, .accountUpdated, .reactionAdded, .reactionRemoved,
    ]

    /// The queue of `message.undelivered` events of a conversation (`push:` and its id): apart from its other events,
    /// so that their waits hold nothing else back.
    public static func pushQueue(of conversation: ConversationID) -> ConversationID {
        ConversationID(rawValue: "push:" + conversation.rawValue)
    }

    /// The queue of an account's `account.updated` events (`account:` and its id): in order, apart from every
    /// conversation's.
    public static func accountQueue(of account: AccountID) -> ConversationID {
        ConversationID(rawValue: "account:" + account.rawValue)
    }
}

/// An event to record with the change it reports.
public struct WebhookEventDraft: Hashable, Sendable {
    /// `webhook-id`: the same for every endpoint and every retry, so receivers de-duplicate.
    public let id: String
    /// The log entry it reports, for a recall to find (and erase) it.
    public var messageID: MessageID? = nil
    public let type: WebhookEventType
    public let conversation: ConversationID
    public let time: Timestamp
    /// The JSON body sent: `{"type", "timestamp", "data"}`.
    public let payload: String
}

/// One device's push token.
public struct PushToken: Hashable, Sendable, Codable {
    public let device: DeviceID
    public let platform: PushPlatform
    public let token: String
    /// APNs: a development (sandbox) token.
    public let sandbox: Bool
    /// When the device registered it.
    public let updatedAt: Timestamp
    public init(device: DeviceID, platform: PushPlatform, token: String, sandbox: Bool, updatedAt: Timestamp) {
        self.device = device
        self.platform = platform
        self.token = token
        self.sandbox = sandbox
        self.updatedAt = updatedAt
    }
}
