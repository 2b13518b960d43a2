// Courier — Apache-2.0
public import CourierWire

/// A recall's statements, written once for every backend that runs ``SQLQuery``s.
extension RecallPlan {
    /// The recalled message's state, its row locked where the backend locks rows: ``target(_:)`` reads it.
    public static func targetQuery(_ id: MessageID) -> SQLQuery {
        "SELECT recalled, seq FROM message WHERE id = \(id.rawValue) \(lockRows: ())"
    }

    public static func target(_ row: SQLRow) throws(StorageError) -> (recalled: Bool, seq: Seq) {
        (try row.bool(0), Seq(try row.int64(1)))
    }

    /// The plan's writes, in order, for a recall in `conversation`.
    public func statements(in conversation: ConversationID) -> [SQLQuery] {
        writes.flatMap { write -> [SQLQuery] in
            switch write {
            case .keepSenderCopy(let id):
                [
                    """
                    INSERT INTO sender_copy (message_id, sender, body, quote)
                    SELECT id, sender, body, quote FROM message WHERE id = \(id.rawValue)
                    """
                ]
            case .erase(let id):
                // SQLite zeroes the freed space (`secure_delete`) and purges the WAL after; PostgreSQL keeps the old
                // row version until (auto)vacuum reclaims it.
                [
                    """
                    UPDATE message SET body = '', quote = NULL, recalled = TRUE, counts_unread = FALSE
                    WHERE id = \(id.rawValue)
                    """
                ]
            case .unquoteReplies(let id):
                ["UPDATE message SET quote = NULL WHERE reply_to = \(id.rawValue)"]
            case .dropReceipts(let seq):
                ["receipt_count", "ack_content"].map {
                    "DELETE FROM \(unescaped: $0) WHERE conversation_id = \(conversation.rawValue) AND seq = \(seq.rawValue)"
                }
            }
        }
    }
}

extension MessageStore where Self: SQLRunner {
    public func senderCopies(
        of messages: [MessageID],
        sender: AccountID
    ) async throws(StorageError) -> [MessageID: SenderCopy] {
        guard !messages.isEmpty else { return [:] }
        var copies: [MessageID: SenderCopy] = [:]
        for row in try await readRows(
            """
            SELECT message_id, body, quote FROM sender_copy
            WHERE sender = \(sender.rawValue) AND message_id IN \(list: messages.map(\.rawValue))
            """
        ) {
            copies[MessageID(rawValue: try row.string(0))] = SenderCopy(body: try row.string(1), quote: try row.optionalString(2))
        }
        return copies
    }
}
