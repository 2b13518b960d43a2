// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
internal import CourierWire

extension EditPlan {
    /// Reads what an edit is decided on, in the caller's transaction, and plans it: the edited message (its row locked
    /// where the backend locks rows), then in a group the editor's and the sender's roles (the caller holds the group's
    /// lock where the backend has one, so no role changes before the edit commits).
    ///
    /// The edited message is the row under the notice's message id, in the entry's conversation, sent by the notice's
    /// sender, and a chat message rather than a notice.
    public typealias Facts = MessageFacts<EditPlan>
}

extension MessageFacts where Plan == EditPlan {
    public init(_ entry: MessageDraft, rules: EditPlan.Rules) {
        let notice = entry.edit
        self.init(
            notice.map { notice in
                """
                SELECT recalled, time FROM message
                WHERE id = \(notice.messageID.rawValue) AND conversation_id = \(entry.conversation.rawValue)
                  AND sender = \(notice.sender.rawValue)
                  AND recall IS NULL AND edit IS NULL AND group_change IS NULL AND receipt_request IS NULL
                \(lockRows: ())
                """
            },
            in: entry.conversation,
            roles: rules.byApp ? nil : notice.map { ($0.editedBy, $0.sender) }
        ) { row, roles throws(StorageError) in
            let target = try row.map { row throws(StorageError) in
                EditPlan.Target(recalled: try row.bool(0), time: Timestamp(milliseconds: try row.int64(1)))
            }
            return try EditPlan(entry, target: target, roles: roles.map { ($0.actor, $0.sender) }, rules: rules)
        }
    }
}

extension EditPlan {
    /// The plan's writes, in order, for `entry` (appended already in the same transaction).
    public func statements(for entry: MessageDraft) -> [SQLQuery] {
        writes.map { write -> SQLQuery in
            switch write {
            case .rewrite(let id):
                // The entry's stored time (the append may have raised it) is the message's `editedAt`.
                """
                UPDATE message SET (body, ext, edited_at) = (SELECT body, ext, time FROM message WHERE id = \(entry.id.rawValue))
                WHERE id = \(id.rawValue)
                """
            case .requoteReplies(let id):
                // Only a text message is quoted (``ReplyQuote``): the replies of any other quote nothing.
                """
                UPDATE message SET quote = (
                    SELECT CASE WHEN type IS NULL THEN \(ReplyQuote.excerpt(of: entry.body)) END FROM message
                    WHERE id = \(id.rawValue)
                )
                WHERE reply_to = \(id.rawValue) AND conversation_id = \(entry.conversation.rawValue)
                """
            }
        }
    }
}
