// Courier — Apache-2.0
internal import GRDB
internal import CourierWire

extension LocalStore {
    /// Applies a newly stored recall notice: the recalled message becomes a tombstone in place (body erased, no longer
    /// unread, status `recalled`) and replies lose their quote of it. A one-way recall leaves the sender's copy alone and tells the
    /// sender nothing.
    ///
    /// - Returns: The notice to report, or `nil` when nothing changed for this account.
    static func applyRecall(
        _ db: Database,
        _ notice: WireRecallNotice,
        entry: WireMessage,
        me: AccountID,
        arrival: RecallNotice.Arrival
    ) throws -> RecallNotice? {
        guard notice.mode == .twoWay || notice.sender != me else { return nil }
        try db.execute(
            sql: "UPDATE message SET body = '', quote = NULL, ext = NULL, recalled = 1, countsUnread = 0 WHERE id = ?",
            arguments: [notice.messageID.rawValue]
        )
        try db.execute(sql: "UPDATE message SET quote = NULL WHERE replyTo = ?", arguments: [notice.messageID.rawValue])
        // Its reactions went with it on the server (ADR 0055).
        try db.execute(sql: "DELETE FROM messageReaction WHERE messageId = ?", arguments: [notice.messageID.rawValue])
        return RecallNotice(notice, conversation: entry.conversation, time: entry.time, arrival: arrival)
    }

    /// Shows a tip in place of a recalled message ("You recalled a message"): a local-only message at the recalled
    /// one's position, with `kind == .recallTip`.
    ///
    /// - Returns: The tip, or `nil` when `id` is not a recalled message stored here.
    func insertRecallTip(for id: MessageID, text: String, me: AccountID) async throws(CourierError) -> Message? {
        let isTombstone = try await write { db -> Bool in
            try db.execute(
                sql: "UPDATE message SET tip = ? WHERE id = ? AND recalled = 1",
                arguments: [text, id.rawValue]
            )
            return db.changesCount > 0
        }
        return isTombstone ? try await message(id, me: me) : nil
    }

    /// Where one of your sends stands on this device, by its idempotency key.
    enum SendState: Equatable {
        /// Acknowledged by the server: stored with this id.
        case stored(MessageID)
        /// Still in the outbox, queued: the server has no id for it yet.
        case pending
        /// In the outbox, refused by the server (or its upload failed), for this reason.
        case failed(CourierError)
        /// Neither: this device never sent it, or not in this conversation.
        case unknown
    }

    func sendState(of clientID: ClientMessageID, in conversation: ConversationID, me: AccountID) async throws(CourierError)
        -> SendState
    {
        try await read { db in
            if let id = try String.fetchOne(
                db,
                sql: "SELECT id FROM message WHERE conversationId = ? AND sender = ? AND clientId = ?",
                arguments: [conversation.rawValue, me.rawValue, clientID.rawValue]
            ) {
                return .stored(MessageID(rawValue: id))
            }
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT failureCode, failureMessage FROM outbox WHERE clientId = ? AND conversationId = ?",
                    arguments: [clientID.rawValue, conversation.rawValue]
                )
            else { return .unknown }
            guard let code = row[0] as String? else { return .pending }
            let message: String = row[1] ?? ""
            if code == CourierError.uploadFailed("").code.rawValue { return .failed(.uploadFailed(message)) }
            return .failed(CourierError(WireError(code: ErrorCode(rawValue: code), message: message), conversation: conversation))
        }
    }
}
