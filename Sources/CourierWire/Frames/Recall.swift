// Courier — Apache-2.0

/// How far a recall reaches (NIM 消息撤回: 双向撤回 / 单向撤回).
public struct RecallMode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// Everyone's copy is removed and every participant, sender included, is notified (the default).
    public static let twoWay = RecallMode(rawValue: "twoWay")
    /// The recipients' copies are removed and they are notified; the sender keeps the message and is not notified.
    public static let oneWay = RecallMode(rawValue: "oneWay")
}

/// `recall`: withdraw a message. Idempotent per requester: a repeat returns the original recall.
public struct RecallRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// `twoWay` when omitted.
    public let mode: RecallMode?
    /// A short note shown with the recall (NIM 附言).
    public let postscript: String?
    /// App-defined JSON text.
    public let ext: String?
    /// Text to replace an already shown push notification.
    public let pushText: String?
    /// App-defined JSON text for that push.
    public let pushPayload: String?
    /// Count the recall notice itself as unread for the recipients (NIM `shouldBeCounted`).
    public let countsAsUnread: Bool?

    public init(
        conversation: ConversationID,
        messageID: MessageID,
        mode: RecallMode? = nil,
        postscript: String? = nil,
        ext: String? = nil,
        pushText: String? = nil,
        pushPayload: String? = nil,
        countsAsUnread: Bool? = nil
    ) {
        self.conversation = conversation
        self.messageID = messageID
        self.mode = mode
        self.postscript = postscript
        self.ext = ext
        self.pushText = pushText
        self.pushPayload = pushPayload
        self.countsAsUnread = countsAsUnread
    }

    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case mode, postscript, ext, pushText, pushPayload, countsAsUnread
    }
}

/// What a recall entry in a conversation's log says (it is a log entry with its own seq, so every device learns of
/// it through normal sync).
public struct WireRecallNotice: Hashable, Sendable, Codable {
    /// The recalled message.
    public let messageID: MessageID
    /// Who sent the recalled message.
    public let sender: AccountID
    /// Who recalled it.
    public let recalledBy: AccountID
    public let mode: RecallMode
    public let postscript: String?
    public let ext: String?
    public let pushText: String?
    public let pushPayload: String?
    /// Whether the notice counts as unread for the recipients.
    public let countsAsUnread: Bool
    /// `true` when the app's backend recalled it (REST, moderation); `recalledBy` is then the message's sender, as a
    /// recall by the sender would say. Absent when a member recalled it.
    public let byApp: Bool?

    public init(
        messageID: MessageID,
        sender: AccountID,
        recalledBy: AccountID,
        mode: RecallMode,
        postscript: String? = nil,
        ext: String? = nil,
        pushText: String? = nil,
        pushPayload: String? = nil,
        countsAsUnread: Bool = false,
        byApp: Bool? = nil
    ) {
        self.messageID = messageID
        self.sender = sender
        self.recalledBy = recalledBy
        self.mode = mode
        self.postscript = postscript
        self.ext = ext
        self.pushText = pushText
        self.pushPayload = pushPayload
        self.countsAsUnread = countsAsUnread
        self.byApp = byApp
    }

    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case sender, recalledBy, mode, postscript, ext, pushText, pushPayload, countsAsUnread, byApp
    }
}
