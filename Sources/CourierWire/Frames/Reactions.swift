// Courier — Apache-2.0

/// `react`: adds a reaction (a short string, usually an emoji) to a message, or removes it (`remove: true`). Agora
/// `addReaction`/`removeReaction`, NIM's quick comments, Stream `sendReaction`/`deleteReaction`.
///
/// A reaction is a row of its message, not an entry of the log (ADR 0055): the members' connected devices get a
/// `reaction` event with the message's counts after it, and a device that was away asks for the counts of the
/// messages it shows (`reactions`). Idempotent: adding a reaction the caller has, or removing one it has not, changes
/// nothing and answers the counts.
public struct ReactRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// 1–64 UTF-8 bytes, no control characters.
    public let reaction: String
    /// `true`: remove it. Absent means add.
    public let remove: Bool?

    public init(conversation: ConversationID, messageID: MessageID, reaction: String, remove: Bool? = nil) {
        self.conversation = conversation
        self.messageID = messageID
        self.reaction = reaction
        self.remove = remove
    }

    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case reaction, remove
    }

    /// The longest reaction, in UTF-8 bytes.
    public static let maxReactionBytes = 64
    /// The most distinct reactions one account puts on one message.
    public static let maxPerAccount = 20
    /// The most distinct reactions on one message.
    public static let maxPerMessage = 50

    /// Whether `reaction` is one a device may send: 1–64 UTF-8 bytes, no control characters.
    public static func isValid(_ reaction: String) -> Bool {
        (1...maxReactionBytes).contains(reaction.utf8.count)
            && !reaction.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

/// How many accounts put one reaction on a message.
public struct ReactionCount: Hashable, Sendable, Codable {
    public let reaction: String
    public let count: Int
    public init(reaction: String, count: Int) {
        self.reaction = reaction
        self.count = count
    }
}

/// A message's reactions: the counts (in reaction order), the caller's own, and the version they are at (it grows
/// with every change: keep the highest).
public struct WireReactions: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let counts: [ReactionCount]
    /// The caller's reactions on it.
    public let mine: [String]
    public let version: Int64

    public init(messageID: MessageID, counts: [ReactionCount], mine: [String], version: Int64) {
        self.messageID = messageID
        self.counts = counts
        self.mine = mine
        self.version = version
    }

    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case counts, mine, version
    }
}

/// The `reaction` event, to the members' connected devices: `account` added (or removed) `reaction` on a message;
/// `counts` are the message's after it, at `version` (an event of a lower version than one already applied is older:
/// ignore its counts).
public struct ReactionEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    public let account: AccountID
    public let reaction: String
    public let added: Bool
    public let counts: [ReactionCount]
    public let version: Int64

    public init(
        conversation: ConversationID,
        messageID: MessageID,
        account: AccountID,
        reaction: String,
        added: Bool,
        counts: [ReactionCount],
        version: Int64
    ) {
        self.conversation = conversation
        self.messageID = messageID
        self.account = account
        self.reaction = reaction
        self.added = added
        self.counts = counts
        self.version = version
    }

    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case account, reaction, added, counts, version
    }
}

/// `reactions`: the reactions of up to 100 messages of a conversation (Agora `getReactionList`), with the caller's
/// own: what a device that was away asks for the messages it shows.
public struct ReactionsRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageIDs: [MessageID]
    public init(conversation: ConversationID, messageIDs: [MessageID]) {
        self.conversation = conversation
        self.messageIDs = messageIDs
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case messageIDs = "messageIds"
    }
    public static let maxMessages = 100
}

/// The `reactions` ack: one entry per message named that exists in the conversation.
public struct ReactionsAck: Hashable, Sendable, Codable {
    public let messages: [WireReactions]
    public init(messages: [WireReactions]) { self.messages = messages }
}

/// `reactionList`: one page of who reacted to a message, optionally with one reaction only (Agora
/// `getReactionDetail`, Stream `getReactions`), in (reaction, account) order.
public struct ReactionListRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    public let reaction: String?
    /// The `nextCursor` of the previous page.
    public let cursor: String?
    /// At most 100 (the default).
    public let limit: Int?
    public init(
        conversation: ConversationID,
        messageID: MessageID,
        reaction: String? = nil,
        cursor: String? = nil,
        limit: Int? = nil
    ) {
        self.conversation = conversation
        self.messageID = messageID
        self.reaction = reaction
        self.cursor = cursor
        self.limit = limit
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case reaction, cursor, limit
    }
}

/// One account's reaction, and when it was added.
public struct ReactionListEntry: Hashable, Sendable, Codable {
    public let account: AccountID
    public let reaction: String
    public let time: Timestamp
    public init(account: AccountID, reaction: String, time: Timestamp) {
        self.account = account
        self.reaction = reaction
        self.time = time
    }
}

/// The `reactionList` ack.
public struct ReactionListAck: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let entries: [ReactionListEntry]
    /// Pass it to get the next page; absent on the last page.
    public let nextCursor: String?
    public init(messageID: MessageID, entries: [ReactionListEntry], nextCursor: String?) {
        self.messageID = messageID
        self.entries = entries
        self.nextCursor = nextCursor
    }
    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case entries, nextCursor
    }
}
