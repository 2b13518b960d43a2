// Courier — Apache-2.0

/// `connect`: the first frame on every connection. Authenticates the device with a client token.
public struct ConnectRequest: Hashable, Sendable, Codable {
    /// A JWT (HS256, signed with the app secret, `sub` = account, `exp` required).
    public let token: String
    /// Optional: if present it must equal the token's `sub`.
    public let account: AccountID?
    public let device: DeviceID
    public init(token: String, account: AccountID?, device: DeviceID) {
        self.token = token
        self.account = account
        self.device = device
    }
}

/// `send`: append a message to a conversation. Idempotent on `(sender, clientId)`.
public struct SendRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let clientID: ClientMessageID
    /// What the body holds (see ``WireMessage/type``); omitted or `text` for text.
    public let type: String?
    public let body: String
    /// A message of the same conversation this one replies to; the server stores a quoted excerpt of it (of a text
    /// message only).
    public let replyTo: MessageID?
    /// Groups: ask the members for read receipts (NIM `teamReceiptEnabled`, Agora `isNeedGroupAck`).
    public let needsReadReceipt: Bool?
    /// Key-values stored and sent with the message (see ``WireMessage/ext``).
    public let ext: [String: String]?
    public init(
        conversation: ConversationID,
        clientID: ClientMessageID,
        type: String? = nil,
        body: String,
        replyTo: MessageID? = nil,
        needsReadReceipt: Bool? = nil,
        ext: [String: String]? = nil
    ) {
        self.conversation = conversation
        self.clientID = clientID
        self.type = type
        self.body = body
        self.replyTo = replyTo
        self.needsReadReceipt = needsReadReceipt
        self.ext = ext
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case clientID = "clientId"
        case type, body, replyTo, needsReadReceipt, ext
    }
}

/// `sync`: catch up. `cursors` maps a conversation to the highest seq the device holds without gaps; conversations
/// missing from it are synced from the start — or, with `since`, only those that changed since that cursor are, and
/// `cursors` may be empty.
public struct SyncRequest: Hashable, Sendable, Codable {
    public let cursors: [ConversationID: Seq]
    /// The `since` of the previous `sync` ack (ADR 0017): of the page before, to continue a sync; of the page that
    /// completed the last sync, to get only what changed since (conversations whose log or receipts in your view
    /// moved, and their entries from the oldest one that changed). A cursor this server cannot honour — made by
    /// another database, or malformed — is refused with `sync.cursorInvalid`: sync again without it.
    public let since: String?
    /// At most this many messages in the ack (capped by the server's `maxPageSize`).
    public let limit: Int?
    /// For a conversation missing from `cursors`: start at its newest `recent` entries, or lower so that every entry
    /// the caller has not read is included (the state then carries `syncFrom`). Omitted: start at seq 0. A new
    /// install sends it until its first sync completes; older entries come from `history`.
    public let recent: Int?
    public init(cursors: [ConversationID: Seq], limit: Int? = nil, recent: Int? = nil, since: String? = nil) {
        self.cursors = cursors
        self.limit = limit
        self.recent = recent
        self.since = since
    }
    /// `cursors` may be left out (a sync with `since` needs none).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        cursors = try container.decodeIfPresent([ConversationID: Seq].self, forKey: .cursors) ?? [:]
        limit = try container.decodeIfPresent(Int.self, forKey: .limit)
        recent = try container.decodeIfPresent(Int.self, forKey: .recent)
        since = try container.decodeIfPresent(String.self, forKey: .since)
    }
}

/// `history`: page a conversation backwards from `before` (exclusive; omitted = from the newest message).
public struct HistoryRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let before: Seq?
    public let limit: Int?
    public init(conversation: ConversationID, before: Seq?, limit: Int?) {
        self.conversation = conversation
        self.before = before
        self.limit = limit
    }
}

/// `deliver`: a delivery receipt. Everything in `conversation` up to `seq` (or up to the message `messageId`) is
/// stored on this device. Exactly one of `seq` and `messageId` is given.
public struct DeliverRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let seq: Seq?
    public let messageID: MessageID?
    public init(conversation: ConversationID, seq: Seq?, messageID: MessageID? = nil) {
        self.conversation = conversation
        self.seq = seq
        self.messageID = messageID
    }
    enum CodingKeys: String, CodingKey {
        case conversation, seq
        case messageID = "messageId"
    }
}

/// `pushToken`: registers this device's push token (APNs or FCM), replacing its previous one, or with no `token`
/// removes it. The server keeps one token per device and hands the tokens to the app's backend, which sends the
/// pushes (NIM `updateApnsToken`, Agora `bindDeviceToken`, RongCloud `setDeviceTokenData`).
public struct PushTokenRequest: Hashable, Sendable, Codable {
    /// `apns` or `fcm`; required with `token`.
    public let platform: PushPlatform?
    /// The token as the platform gives it, APNs' as lowercase hex; at most 4,096 characters. Omitted: unregister.
    public let token: String?
    /// APNs: a development (sandbox) token.
    public let sandbox: Bool?
    public init(platform: PushPlatform?, token: String?, sandbox: Bool? = nil) {
        self.platform = platform
        self.token = token
        self.sandbox = sandbox
    }
}

/// A push service.
public struct PushPlatform: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// Apple Push Notification service.
    public static let apns = PushPlatform(rawValue: "apns")
    /// Firebase Cloud Messaging.
    public static let fcm = PushPlatform(rawValue: "fcm")
    /// The platforms the server accepts.
    public static let all: [PushPlatform] = [.apns, .fcm]
}
