// Courier — Apache-2.0

/// `read`: a read receipt. Exactly one of `messageIds`, `seq`, `time` and `all` says what was read:
///
/// | field | semantics | vendor origin |
/// | --- | --- | --- |
/// | `messageIds` | exactly these messages (1–100 of one conversation); naming the newest message moves the watermark | Agora `sendMessageReadAck`, NIM `sendMessageReceipt` |
/// | `all: true` | everything in the conversation up to now (its newest message at the commit) | Agora `ackConversationRead` |
/// | `seq` | everything up to `seq` (what the SDK sends for a conversation read, so that a message the user has not seen yet stays unread) | NIM receipt on the last message |
/// | `time` | every message with `time <= t` | RongCloud `sendReadReceiptMessage(time:)` |
///
/// With `private: true` (or when the account turned read receipts off) the read clears the reader's own unread
/// state on all its devices and tells no peer.
public struct ReadRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageIDs: [MessageID]?
    public let seq: Seq?
    public let time: Timestamp?
    public let all: Bool?
    public let isPrivate: Bool?
    /// Groups, with `messageIds`: a short note for the senders (Agora `sendGroupMessageReadAck` content), at most
    /// 256 UTF-8 bytes.
    public let content: String?

    public init(
        conversation: ConversationID,
        messageIDs: [MessageID]? = nil,
        seq: Seq? = nil,
        time: Timestamp? = nil,
        all: Bool? = nil,
        isPrivate: Bool? = nil,
        content: String? = nil
    ) {
        self.conversation = conversation
        self.messageIDs = messageIDs
        self.seq = seq
        self.time = time
        self.all = all
        self.isPrivate = isPrivate
        self.content = content
    }

    enum CodingKeys: String, CodingKey {
        case conversation
        case messageIDs = "messageIds"
        case seq, time, all
        case isPrivate = "private"
        case content
    }

    /// What the request marks as read, or `nil` unless exactly one of the four is given.
    public var target: ReadTarget? {
        switch (messageIDs, seq, time, all) {
        case (let ids?, nil, nil, nil): .messages(ids)
        case (nil, let seq?, nil, nil): .upTo(seq)
        case (nil, nil, let time?, nil): .upToTime(time)
        case (nil, nil, nil, true?): .all
        default: nil
        }
    }
}

/// What a read receipt covers.
public enum ReadTarget: Hashable, Sendable {
    /// Exactly these messages.
    case messages([MessageID])
    /// Everything up to this seq.
    case upTo(Seq)
    /// Every message with `time <=` this time.
    case upToTime(Timestamp)
    /// Everything up to the newest message.
    case all
}

/// Which kind of read receipt changed a reader's state.
public struct ReadCause: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// A message read ack.
    public static let message = ReadCause(rawValue: "message")
    /// A conversation read ack (`all` or `seq`).
    public static let conversation = ReadCause(rawValue: "conversation")
    /// A read-up-to-time ack.
    public static let time = ReadCause(rawValue: "time")
}

/// The caller's own reading position in a conversation: the `read` ack, and (as ``ReadStateEvent``) what the
/// reader's other devices learn. Includes private reads; peers never see it.
public struct ReadState: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    /// Everything up to here is read.
    public let watermark: Watermark
    /// Messages above the watermark read one by one (message read acks), ascending.
    public let readSeqs: [Seq]
    /// Messages of others in the conversation not read yet.
    public let unreadCount: Int
    public init(conversation: ConversationID, watermark: Watermark, readSeqs: [Seq], unreadCount: Int) {
        self.conversation = conversation
        self.watermark = watermark
        self.readSeqs = readSeqs
        self.unreadCount = unreadCount
    }
}

/// `readState` event, to the reader's other devices: its reading position changed (Agora `onConversationRead` on
/// multi-device when `cause` is `conversation`).
public struct ReadStateEvent: Hashable, Sendable, Codable {
    public let state: ReadState
    public let cause: ReadCause
    public init(state: ReadState, cause: ReadCause) {
        self.state = state
        self.cause = cause
    }
}

/// `read` event, to the other members' devices: what `account` has read, as it shares it (private reads are not
/// included). A snapshot, not a delta: apply it idempotently.
public struct ReadEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let account: AccountID
    /// Everything up to here is read (it also counts as delivered).
    public let watermark: Watermark
    /// Messages above the watermark read one by one, ascending.
    public let readSeqs: [Seq]
    public init(conversation: ConversationID, account: AccountID, watermark: Watermark, readSeqs: [Seq]) {
        self.conversation = conversation
        self.account = account
        self.watermark = watermark
        self.readSeqs = readSeqs
    }
}

/// Who decides whether read receipts are shared: the app's operator, in the server's configuration.
public struct ReadReceiptPolicy: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// Each account decides, globally and per conversation (the default).
    public static let userChoice = ReadReceiptPolicy(rawValue: "userChoice")
    /// Every read is shared; accounts cannot turn it off and private reads are refused.
    public static let alwaysOn = ReadReceiptPolicy(rawValue: "alwaysOn")
    /// No read is ever shared; reads only clear the reader's own unread state.
    public static let alwaysOff = ReadReceiptPolicy(rawValue: "alwaysOff")
    public static let all: [ReadReceiptPolicy] = [.userChoice, .alwaysOn, .alwaysOff]
}

/// `readReceiptSettings`: reads, and optionally changes, whether the caller shares read receipts — account-wide,
/// or for one `conversation` (which then overrides the account-wide setting).
public struct ReadReceiptSettingsRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID?
    /// The new setting; omitted to only read the settings.
    public let sendReadReceipts: Bool?
    public init(conversation: ConversationID? = nil, sendReadReceipts: Bool? = nil) {
        self.conversation = conversation
        self.sendReadReceipts = sendReadReceipts
    }
}

/// The `readReceiptSettings` ack: the caller's settings after the request.
public struct ReadReceiptSettings: Hashable, Sendable, Codable {
    public let policy: ReadReceiptPolicy
    /// The account-wide setting (default `true`).
    public let sendReadReceipts: Bool
    /// Per-conversation settings, which override the account-wide one.
    public let conversations: [ConversationID: Bool]
    public init(policy: ReadReceiptPolicy, sendReadReceipts: Bool, conversations: [ConversationID: Bool]) {
        self.policy = policy
        self.sendReadReceipts = sendReadReceipts
        self.conversations = conversations
    }

    /// Whether a read in `conversation` is shared with peers.
    public func sharesReads(in conversation: ConversationID) -> Bool {
        switch policy {
        case .alwaysOn: true
        case .alwaysOff: false
        default: conversations[conversation] ?? sendReadReceipts
        }
    }
}

/// The `unread` ack: the caller's unread counts, as the server maintains them.
public struct UnreadAck: Hashable, Sendable, Codable {
    /// Conversations with unread messages (those with none are left out).
    public let conversations: [ConversationID: Int]
    public let total: Int
    public init(conversations: [ConversationID: Int], total: Int) {
        self.conversations = conversations
        self.total = total
    }
}
