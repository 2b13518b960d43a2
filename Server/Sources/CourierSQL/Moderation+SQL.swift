// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

extension ModerationStore where Self: SQLRunner {
    public func conversations(
        _ filter: ConversationFilter,
        after cursor: ConversationID?,
        limit: Int
    ) async throws(StorageError) -> [ConversationSummary] {
        // As with accounts, the prefix is compared as text (`substr`), not as a range of ids (collations differ).
        let prefix = filter.prefix ?? ""
        var query: SQLQuery = """
            SELECT c.id, c.kind, c.member_count, c.last_seq, c.last_time FROM conversation c
            WHERE c.id > \(cursor?.rawValue ?? "") AND c.dismissed_seq IS NULL
              AND substr(c.id, 1, \(unescaped: String(prefix.utf8.count))) = \(prefix)
            """
        if let kind = filter.kind { query += " AND c.kind = \(kind.rawValue)" }
        if let member = filter.member {
            query += """
                 AND EXISTS (SELECT 1 FROM conversation_member m WHERE m.conversation_id = c.id
                    AND m.account = \(member.rawValue))
                """
        }
        query += " ORDER BY c.id LIMIT \(limit)"
        return try await readRows(query).map { row throws(StorageError) in
            let kind = ConversationKind(rawValue: try row.string(1)) ?? .direct
            return ConversationSummary(
                id: ConversationID(rawValue: try row.string(0)),
                kind: kind,
                memberCount: kind == .direct ? 2 : try row.int(2),
                lastSeq: Seq(try row.int64(3)),
                lastTime: Timestamp(milliseconds: try row.int64(4))
            )
        }
    }

    public func dropSenderCopies(_ scope: PurgeScope, before time: Timestamp) async throws(StorageError) {
        let condition: SQLQuery =
            switch scope {
            case .account(let account): "sender = \(account.rawValue)"
            case .conversation(let conversation): "conversation_id = \(conversation.rawValue)"
            }
        _ = try await writeRows(
            """
            DELETE FROM sender_copy WHERE message_id IN (
                SELECT id FROM message WHERE \(condition) AND time < \(time.rawValue) AND recalled = TRUE)
            """
        )
    }

    public func purgeCandidates(
        _ scope: PurgeScope,
        before time: Timestamp,
        limit: Int
    ) async throws(StorageError) -> [PurgeCandidate] {
        // By the index each scope has: (sender, client_id) for an account, (conversation_id, seq) for a conversation.
        let (condition, order): (SQLQuery, String) =
            switch scope {
            case .account(let account): ("sender = \(account.rawValue)", "time, id")
            case .conversation(let conversation): ("conversation_id = \(conversation.rawValue)", "seq")
            }
        return try await readRows(
            """
            SELECT id, conversation_id, sender FROM message
            WHERE \(condition) AND time < \(time.rawValue) AND recalled = FALSE
              AND recall IS NULL AND edit IS NULL AND group_change IS NULL AND receipt_request IS NULL
              AND conversation_id NOT IN (SELECT id FROM conversation WHERE dismissed_seq IS NOT NULL)
            ORDER BY \(unescaped: order) LIMIT \(limit)
            """
        ).map { row throws(StorageError) in
            PurgeCandidate(
                message: MessageID(rawValue: try row.string(0)),
                conversation: ConversationID(rawValue: try row.string(1)),
                sender: AccountID(rawValue: try row.string(2))
            )
        }
    }
}
