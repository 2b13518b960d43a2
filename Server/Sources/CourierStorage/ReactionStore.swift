// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Reactions (ADR 0055): rows of their message with a count per reaction, changed in a transaction that locks the
/// message's row, so that counts are exact and versions follow the order of the changes.
public protocol ReactionStore: Sendable {
    /// Adds (or removes) `write.reaction` of `write.account` on a chat message of `write.conversation`, in one
    /// transaction that checks, from what it reads, that the message is there and not recalled and that the account
    /// is a member (in a group); records the webhook event and tells the other nodes when anything changed.
    ///
    /// - Throws: ``StorageError/conversationNotFound(_:)`` for no such chat message in the conversation;
    ///   ``StorageError/groupRefused(_:)`` with ``GroupRefusal/actorNotAMember``; ``StorageError/reactionRefused(_:)``.
    func react(_ write: ReactionWrite) async throws(StorageError) -> ReactionOutcome
    /// The reactions of those of `messages` that are in `conversation`, with `viewer`'s own, in the order given.
    func reactions(of messages: [MessageID], in conversation: ConversationID, viewer: AccountID)
        async throws(StorageError) -> [WireReactions]
    /// Who reacted to `message` (with `reaction` only, when given), in (reaction, account) order after `position`.
    func reactionList(of message: MessageID, reaction: String?, after position: ReactionPosition?, limit: Int)
        async throws(StorageError) -> [ReactionListEntry]
}

/// One reaction to add or remove.
public struct ReactionWrite: Hashable, Sendable {
    public let conversation: ConversationID
    public let message: MessageID
    public let account: AccountID
    public let reaction: String
    public let add: Bool
    public let time: Timestamp

    public init(
        conversation: ConversationID,
        message: MessageID,
        account: AccountID,
        reaction: String,
        add: Bool,
        time: Timestamp
    ) {
        self.conversation = conversation
        self.message = message
        self.account = account
        self.reaction = reaction
        self.add = add
        self.time = time
    }
}

/// What a reaction write left: the message's reactions, and the change when it changed anything.
public struct ReactionOutcome: Hashable, Sendable {
    public let reactions: WireReactions
    public let change: Change?

    public init(reactions: WireReactions, change: Change?) {
        self.reactions = reactions
        self.change = change
    }
}

/// A place in a reaction list: after this reaction of this account.
public struct ReactionPosition: Hashable, Sendable {
    public let reaction: String
    public let account: AccountID
    public init(reaction: String, account: AccountID) {
        self.reaction = reaction
        self.account = account
    }
}
