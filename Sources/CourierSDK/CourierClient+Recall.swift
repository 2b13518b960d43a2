// Courier — Apache-2.0
public import CourierWire

extension CourierClient {
    /// Recalls a message you sent (NIM `revokeMessage:`, Agora `recallMessage`, RongCloud `recallMessage`).
    ///
    /// The recall is an entry in the conversation's log, so every device learns of it — live, or when it next
    /// connects — and removes its copy; the server erases the body, removes quotes of it from replies, and stops it
    /// counting as unread. With `.oneWay` the recipients' copies go and your own stays.
    ///
    /// Recalling again what you already recalled returns the original recall.
    ///
    /// - Parameters:
    ///   - message: A message you sent, with its server id.
    ///   - conversation: Its conversation.
    ///   - mode: `.twoWay` (default) or `.oneWay` (NIM 双向/单向撤回).
    ///   - postscript: A note shown with the recall (NIM `revokeMessage:option:` postscript, 附言).
    ///   - ext: Key-values carried by the notice (``RecallNotice/ext``), as a message's `ext` is: at most 64 keys of
    ///     1–64 characters and 4,096 bytes in all.
    ///   - pushText: Text to replace an already shown push notification (NIM `apnsContent`).
    ///   - pushPayload: App-defined JSON for that push (NIM `apnsPayload`).
    ///   - countsAsUnread: Count the notice itself as unread for the recipients (NIM `shouldBeCounted`).
    /// - Returns: The recall as the other devices see it (`arrival` is `.online`).
    /// - Throws: ``CourierError/recallRefused(code:message:)`` with `recall.notPermitted`, `recall.windowExpired`
    ///   (the server's window, 120 s by default) or `recall.alreadyRecalled`; ``CourierError/messageNotFound(_:)``;
    ///   `message.notInConversation`; ``CourierError/notConnected``. A message still in the outbox has no id yet:
    ///   recall it by its client id with ``recall(sent:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``.
    @discardableResult
    public func recall(
        _ message: MessageID,
        in conversation: ConversationID,
        mode: RecallMode = .twoWay,
        postscript: String? = nil,
        ext: [String: String]? = nil,
        pushText: String? = nil,
        pushPayload: String? = nil,
        countsAsUnread: Bool = false
    ) async throws -> RecallNotice {
        let me = try member(of: conversation)
        try Self.check(ext: ext)
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        let request = RecallRequest(
            conversation: conversation,
            messageID: message,
            mode: mode,
            postscript: postscript,
            ext: LocalStore.json(ext: ext),
            pushText: pushText,
            pushPayload: pushPayload,
            countsAsUnread: countsAsUnread
        )
        guard case .recall(let ack) = try await link.request({ .recall($0, request) }).ack(about: conversation),
            let notice = ack.message.recall
        else { throw CourierError.unexpectedReply }
        try await store.apply([ack.message], arrival: .online, me: me, then: publisher(for: link))
        return RecallNotice(notice, conversation: conversation, time: ack.message.time, arrival: .online)
    }

    /// Recalls one of your messages by the client id it was sent with — what a chat screen holds for a message it
    /// showed while sending (``PendingMessage/clientID``, ``Message/clientID``). Options as
    /// ``recall(_:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``.
    ///
    /// - Throws: ``CourierError/recallRefused(code:message:)`` with `recall.notSent` while the message is still in
    ///   the outbox (the server never acknowledged it, so there is nothing to recall there: the SPEC's "not yet sent");
    ///   ``CourierError/messageNotFound(_:)`` when this device never sent it in `conversation`; otherwise as the
    ///   recall by id.
    @discardableResult
    public func recall(
        sent clientID: ClientMessageID,
        in conversation: ConversationID,
        mode: RecallMode = .twoWay,
        postscript: String? = nil,
        ext: [String: String]? = nil,
        pushText: String? = nil,
        pushPayload: String? = nil,
        countsAsUnread: Bool = false
    ) async throws -> RecallNotice {
        let me = try member(of: conversation)
        switch try await store.sendState(of: clientID, in: conversation, me: me) {
        case .stored(let id):
            return try await recall(
                id,
                in: conversation,
                mode: mode,
                postscript: postscript,
                ext: ext,
                pushText: pushText,
                pushPayload: pushPayload,
                countsAsUnread: countsAsUnread
            )
        case .pending, .failed:
            throw CourierError.recallRefused(
                code: .recallNotSent,
                message: "The message has not reached the server yet; there is nothing to recall there."
            )
        case .unknown:
            throw CourierError.messageNotFound("No message sent with client id '\(clientID)' in \(conversation).")
        }
    }

    /// Shows a tip in place of a recalled message ("You recalled a message"), NIM's local tip message: a local-only
    /// message at the recalled one's position with `kind == .recallTip` and `text` as its body.
    ///
    /// - Returns: The tip, or `nil` when `message` is not a recalled message stored on this device.
    @discardableResult
    public func insertRecallTip(for message: MessageID, text: String) async throws -> Message? {
        try await store.insertRecallTip(for: message, text: text, me: try boundAccount())
    }
}
