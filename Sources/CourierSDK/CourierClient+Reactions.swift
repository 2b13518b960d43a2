// Courier — Apache-2.0
public import CourierWire

extension CourierClient {
    /// Adds a reaction (a short string, usually an emoji) to a message (Agora `addReaction`, NIM quick comments,
    /// Stream `sendReaction`). Every member's connected device hears of it (``CourierEvent/reactionsChanged(_:)``) with
    /// the message's counts; adding one you have changes nothing.
    ///
    /// - Returns: The message's reactions after it: counts in reaction order, and yours.
    /// - Throws: ``CourierError/invalidInput(code:message:)`` for a reaction that is empty, over 64 UTF-8 bytes or holds
    ///   control characters; ``CourierError/server(code:message:)`` with `reaction.messageRecalled` or `reaction.tooMany`
    ///   (20 of yours on a message, 50 distinct on it); ``CourierError/messageNotFound(_:)``;
    ///   ``CourierError/notConnected``.
    @discardableResult
    public func react(_ reaction: String, to message: MessageID, in conversation: ConversationID) async throws
        -> (counts: [ReactionCount], mine: [String])
    {
        try await send(ReactRequest(conversation: conversation, messageID: message, reaction: reaction))
    }

    /// Removes your reaction from a message (Agora `removeReaction`, Stream `deleteReaction`); removing one you do not
    /// have changes nothing. Returns and throws as ``react(_:to:in:)``.
    @discardableResult
    public func removeReaction(_ reaction: String, from message: MessageID, in conversation: ConversationID)
        async throws -> (counts: [ReactionCount], mine: [String])
    {
        try await send(ReactRequest(conversation: conversation, messageID: message, reaction: reaction, remove: true))
    }

    /// Asks the server for the reactions of up to 100 messages (Agora `getReactionList`) and keeps them, so that
    /// ``Message/reactions`` is current: what a chat screen asks for the rows it shows after the device was away
    /// (reactions are not entries of the log, so `sync` does not bring them).
    public func fetchReactions(for messages: [MessageID], in conversation: ConversationID) async throws {
        _ = try member(of: conversation)
        guard !messages.isEmpty else { return }
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        for start in stride(from: 0, to: messages.count, by: ReactionsRequest.maxMessages) {
            let page = Array(messages[start..<min(start + ReactionsRequest.maxMessages, messages.count)])
            let request = ReactionsRequest(conversation: conversation, messageIDs: page)
            guard case .reactions(let ack) = try await link.request({ .reactions($0, request) }).ack(about: conversation)
            else { throw CourierError.unexpectedReply }
            try await store.store(ack.messages)
        }
    }

    /// One page of who reacted to a message, with one reaction only when given (Agora `getReactionDetail`), in
    /// (reaction, account) order; pass the returned cursor for the next page (`nil` on the last).
    public func reactionList(
        for message: MessageID,
        in conversation: ConversationID,
        reaction: String? = nil,
        cursor: String? = nil,
        limit: Int = 100
    ) async throws -> (entries: [ReactionListEntry], nextCursor: String?) {
        _ = try member(of: conversation)
        let request = ReactionListRequest(
            conversation: conversation,
            messageID: message,
            reaction: reaction,
            cursor: cursor,
            limit: limit
        )
        guard case .reactionList(let page) = try await requestAck(about: conversation, { .reactionList($0, request) })
        else { throw CourierError.unexpectedReply }
        return (page.entries, page.nextCursor)
    }

    private func send(_ request: ReactRequest) async throws -> (counts: [ReactionCount], mine: [String]) {
        _ = try member(of: request.conversation)
        guard case .react(let reactions) = try await requestAck(about: request.conversation, { .react($0, request) })
        else { throw CourierError.unexpectedReply }
        try await store.store([reactions])
        return (reactions.counts, reactions.mine)
    }
}
