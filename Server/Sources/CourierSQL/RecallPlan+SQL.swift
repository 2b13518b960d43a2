// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

extension RecallPlan {
    /// Reads what a recall is decided on, in the caller's transaction, and plans it: the recalled message (its row
    /// locked where the backend locks rows), then in a group the requester's and the sender's roles (the caller holds
    /// the group's lock where the backend has one, so no role changes before the recall commits).
    ///
    /// The recalled message is the row under the notice's message id, in the entry's conversation, sent by the
    /// notice's sender, and a message rather than a recall notice: the roles, the notice and the erasure are all about
    /// that sender, so a notice that names another sender than the row's names no message (an import names a
    /// message from its lines before the row is read, and the line it named it from may have been refused).
    public typealias Facts = MessageFacts<RecallPlan>
}

extension MessageFacts where Plan == RecallPlan {
    public init(_ entry: MessageDraft, rules: RecallPlan.Rules) {
        let notice = entry.recall
        self.init(
            notice.map { notice in
                """
                SELECT recalled, seq, time, body, ext FROM message
                WHERE id = \(notice.messageID.rawValue) AND conversation_id = \(entry.conversation.rawValue)
                  AND sender = \(notice.sender.rawValue) AND recall IS NULL AND edit IS NULL
                \(lockRows: ())
                """
            },
            in: entry.conversation,
            roles: rules.byApp ? nil : notice.map { ($0.recalledBy, $0.sender) }
        ) { row, roles throws(StorageError) in
            let target = try row.map { row throws(StorageError) in
                RecallPlan.Target(
                    recalled: try row.bool(0),
                    seq: Seq(try row.int64(1)),
                    time: Timestamp(milliseconds: try row.int64(2)),
                    media: MediaReference.ids(in: [try row.string(3), try row.optionalString(4)])
                )
            }
            return try RecallPlan(entry, target: target, roles: roles.map { ($0.actor, $0.sender) }, rules: rules)
        }
    }
}

extension RecallPlan {
    /// The plan's writes, in order, for a recall in `conversation`.
    public func statements(in conversation: ConversationID) -> [SQLQuery] {
        writes.flatMap { write -> [SQLQuery] in
            switch write {
            case .keepSenderCopy(let id):
                [
                    """
                    INSERT INTO sender_copy (message_id, sender, body, quote, ext)
                    SELECT id, sender, body, quote, ext FROM message WHERE id = \(id.rawValue)
                    """
                ]
            case .erase(let id):
                // SQLite zeroes the freed space (`secure_delete`) and purges the WAL after; PostgreSQL keeps the old
                // row version until (auto)vacuum reclaims it. The webhook deliveries that carry the body go too,
                // made or not: found by their conversation and time (an index), then by the message's id; its events in
                // the log by the message's id.
                [
                    """
                    DELETE FROM webhook_delivery
                    WHERE conversation_id IN \(list: Self.webhookQueues(of: conversation))
                      AND created_at = (SELECT time FROM message WHERE id = \(id.rawValue))
                      AND type IN ('message.created', 'message.undelivered')
                      AND \(json: Self.messageID) = \(id.rawValue)
                    """,
                    """
                    DELETE FROM webhook_event
                    WHERE message_id = \(id.rawValue) AND type IN ('message.created', 'message.undelivered')
                    """,
                    """
                    UPDATE message SET body = '', quote = NULL, ext = NULL, recalled = TRUE, counts_unread = FALSE
                    WHERE id = \(id.rawValue)
                    """,
                ]
            case .eraseEdits(let id):
                // Found by the partial index on `edit_of`; their deliveries by conversation and time, then by id.
                [
                    """
                    DELETE FROM webhook_delivery
                    WHERE conversation_id = \(conversation.rawValue)
                      AND created_at IN (SELECT time FROM message WHERE edit_of = \(id.rawValue))
                      AND type = 'message.edited'
                      AND \(json: Self.messageID) IN (SELECT id FROM message WHERE edit_of = \(id.rawValue))
                    """,
                    """
                    DELETE FROM webhook_event
                    WHERE message_id IN (SELECT id FROM message WHERE edit_of = \(id.rawValue)) AND type = 'message.edited'
                    """,
                    "UPDATE message SET body = '', ext = NULL, recalled = TRUE WHERE edit_of = \(id.rawValue)",
                ]
            case .unquoteReplies(let id):
                [
                    """
                    UPDATE webhook_delivery SET payload = \(json: Self.withoutQuote)
                    WHERE conversation_id IN \(list: Self.webhookQueues(of: conversation))
                      AND created_at IN (SELECT time FROM message WHERE reply_to = \(id.rawValue))
                      AND type IN ('message.created', 'message.undelivered')
                      AND \(json: Self.messageID) IN (SELECT id FROM message WHERE reply_to = \(id.rawValue))
                    """,
                    """
                    UPDATE webhook_event SET payload = \(json: Self.withoutQuote)
                    WHERE message_id IN (SELECT id FROM message WHERE reply_to = \(id.rawValue))
                      AND type IN ('message.created', 'message.undelivered')
                    """,
                    "UPDATE message SET quote = NULL WHERE reply_to = \(id.rawValue)",
                ]
            case .eraseMedia(let message, let ids):
                // Their bytes are deleted after the commit (``MediaStore/erasedMedia(limit:)``).
                [
                    """
                    UPDATE media SET state = \(MediaState.erased)
                    WHERE id IN \(list: ids) AND conversation_id = \(conversation.rawValue)
                      AND (uploader IS NULL OR uploader = (SELECT sender FROM message WHERE id = \(message.rawValue)))
                    """
                ]
            case .dropReactions(let id):
                ["reaction", "reaction_count"].map { "DELETE FROM \(unescaped: $0) WHERE message_id = \(id.rawValue)" }
            case .dropReceipts(let seq):
                ["receipt_count", "read_note"].map {
                    "DELETE FROM \(unescaped: $0) WHERE conversation_id = \(conversation.rawValue) AND seq = \(seq.rawValue)"
                }
            }
        }
    }
}

extension RecallPlan {
    /// Where a conversation's message events wait: its own queue and its push queue (`message.undelivered`).
    static func webhookQueues(of conversation: ConversationID) -> [String] {
        [conversation.rawValue, WebhookEventType.pushQueue(of: conversation).rawValue]
    }

    /// The id of the message a delivery's payload carries: `{"data": {"message": …}}`, or `{"message": …}` as the
    /// push queue stores it.
    static let messageID = SQLJSONPath.text(column: "payload", paths: [["data", "message", "id"], ["message", "id"]])

    /// A delivery's payload without the message's quote.
    static let withoutQuote = SQLJSONPath.removing(
        column: "payload",
        paths: [["data", "message", "quote"], ["message", "quote"]]
    )
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
            SELECT message_id, body, quote, ext FROM sender_copy
            WHERE sender = \(sender.rawValue) AND message_id IN \(list: messages.map(\.rawValue))
            """
        ) {
            copies[MessageID(rawValue: try row.string(0))] = SenderCopy(
                body: try row.string(1),
                quote: try row.optionalString(2),
                ext: try EntryJSON.decode([String: String].self, try row.optionalString(3))
            )
        }
        return copies
    }
}
