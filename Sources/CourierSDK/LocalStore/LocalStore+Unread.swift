// Courier — Apache-2.0
internal import GRDB
internal import CourierWire

/// Unread counts: derived from the account's reading position and what is stored, cached per conversation so that
/// changes can be reported.
extension LocalStore {
    /// Recomputes the unread counts of `conversations` and reports those that changed.
    static func refreshUnreadCounts(
        _ db: Database,
        _ conversations: Set<ConversationID>,
        me: AccountID
    ) throws -> [UnreadCountUpdate] {
        var changed: [(ConversationID, Int)] = []
        for conversation in conversations.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard
                let stored = try Int.fetchOne(
                    db,
                    sql: "SELECT unreadCount FROM conversation WHERE id = ?",
                    arguments: [conversation.rawValue]
                )
            else { continue }
            let count = try unreadCount(db, conversation, me: me)
            guard count != stored else { continue }
            try db.execute(
                sql: "UPDATE conversation SET unreadCount = ? WHERE id = ?",
                arguments: [count, conversation.rawValue]
            )
            changed.append((conversation, count))
        }
        guard !changed.isEmpty else { return [] }
        let total = try totalUnreadCount(db)
        return changed.map { UnreadCountUpdate(conversation: $0.0, unreadCount: $0.1, totalUnreadCount: total) }
    }

    /// The SQL condition (on `message` as `m`; `?1` its conversation, `?2` the account) of a message that counts as
    /// unread: of others, above the account's own watermark, not read one by one, nor cleared or deleted for itself.
    static let isUnread = """
        m.conversationId = ?1 AND m.sender != ?2 AND m.countsUnread = 1
        AND m.seq > coalesce((SELECT readSeq FROM watermark WHERE conversationId = ?1 AND account = ?2), 0)
        AND NOT EXISTS (SELECT 1 FROM readAck r WHERE r.conversationId = ?1 AND r.account = ?2 AND r.seq = m.seq)
        AND \(shown(in: "?1"))
        """

    static func unreadCount(_ db: Database, _ conversation: ConversationID, me: AccountID) throws -> Int {
        let sql = "SELECT count(*) FROM message m WHERE \(isUnread)"
        return try Int.fetchOne(db, sql: sql, arguments: [conversation.rawValue, me.rawValue]) ?? 0
    }

    /// The highest seq this device holds in `conversation`, 0 for none.
    static func highestSeq(_ db: Database, _ conversation: ConversationID) throws -> Int64 {
        let sql = "SELECT max(seq) FROM message WHERE conversationId = ?"
        return try Int64.fetchOne(db, sql: sql, arguments: [conversation.rawValue]) ?? 0
    }

    static func totalUnreadCount(_ db: Database, includingMuted: Bool = true) throws -> Int {
        let sql = "SELECT coalesce(sum(unreadCount), 0) FROM conversation" + (includingMuted ? "" : " WHERE NOT muted")
        return try Int.fetchOne(db, sql: sql) ?? 0
    }

    /// The unread count of one conversation (0 when unknown).
    func unreadCount(in conversation: ConversationID) async throws(CourierError) -> Int {
        try await read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT unreadCount FROM conversation WHERE id = ?",
                arguments: [conversation.rawValue]
            ) ?? 0
        }
    }

    /// The unread count across every conversation, or every one not muted.
    func totalUnreadCount(includingMuted: Bool = true) async throws(CourierError) -> Int {
        try await read { db in try Self.totalUnreadCount(db, includingMuted: includingMuted) }
    }
}
