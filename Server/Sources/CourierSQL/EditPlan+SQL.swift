// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

extension EditPlan {
    /// Reads what an edit is decided on, in the caller's transaction, and plans it: the edited message (its row locked
    /// where the backend locks rows), then in a group the editor's and the sender's roles (the caller holds the group's
    /// lock where the backend has one, so no role changes before the edit commits).
    ///
    /// The edited message is the row under the notice's message id, in the entry's conversation, sent by the notice's
    /// sender, and a chat message rather than a notice.
    public struct Facts: SQLProcedure {
        private let entry: MessageDraft
        private let rules: Rules
        private var facts: Nested<MessageFacts>?

        public init(_ entry: MessageDraft, rules: Rules) {
            self.entry = entry
            self.rules = rules
            if let notice = entry.edit {
                let (id, conversation) = (notice.messageID.rawValue, entry.conversation.rawValue)
                facts = Nested(
                    MessageFacts(
                        """
                        SELECT recalled, time FROM message
                        WHERE id = \(id) AND conversation_id = \(conversation) AND sender = \(notice.sender.rawValue)
                          AND recall IS NULL AND edit IS NULL AND group_change IS NULL AND receipt_request IS NULL
                        \(lockRows: ())
                        """,
                        in: entry.conversation,
                        roles: rules.byApp ? nil : (notice.editedBy, notice.sender)
                    )
                )
            }
        }

        public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<EditPlan> {
            guard var facts else { return .done(try EditPlan(entry, target: nil, roles: nil, rules: rules)) }
            defer { self.facts = facts }
            switch try facts.step(rows) {
            case .run(let query): return .run(query)
            case .done(let found):
                let target = try found.row.map { row throws(StorageError) in
                    Target(recalled: try row.bool(0), time: Timestamp(milliseconds: try row.int64(1)))
                }
                return .done(
                    try EditPlan(entry, target: target, roles: found.roles.map { ($0.actor, $0.sender) }, rules: rules)
                )
            }
        }
    }

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
