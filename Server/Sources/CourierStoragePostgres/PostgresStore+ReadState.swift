// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire
internal import PostgresNIO

extension PostgresStore {

    public func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int] {
        try await withPooledConnection { connection in
            try await unreadCounts(of: account, in: nil, on: connection)
        }
    }

    /// Messages of others above the reader's own watermark and not read one by one, per conversation.
    func unreadCounts(
        of account: AccountID,
        in conversation: ConversationID?,
        on connection: PostgresConnection
    ) async throws -> [ConversationID: Int] {
        var counts: [ConversationID: Int] = [:]
        if let conversation {
            let row = try await connection.run(
                UnreadCountIn.self,
                .of(account.rawValue, conversation.rawValue),
                logger: logger
            ).first
            if let count = try row?.decode(Int64.self), count > 0 { counts[conversation] = Int(count) }
            return counts
        }
        for row in try await connection.run(UnreadCounts.self, .of(account.rawValue), logger: logger) {
            let (id, count) = try row.decode((String, Int64).self)
            counts[ConversationID(rawValue: id)] = Int(count)
        }
        return counts
    }

    /// An account's unread count in one conversation: entries of others past its own position that count as unread
    /// and that it has not read one by one.
    enum UnreadCountIn: HotStatement {
        static let sql = "SELECT count(*) \(unread) AND cm.conversation_id = $2"
    }

    /// ``UnreadCountIn`` for every conversation of the account that has unread entries.
    enum UnreadCounts: HotStatement {
        static let sql = "SELECT m.conversation_id, count(*) \(unread) GROUP BY m.conversation_id"
    }

    /// The entries unread by account `$1`, from its memberships (its `WHERE` open for more conditions).
    static let unread = """
        FROM conversation_member cm
        LEFT JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
        LEFT JOIN conversation_view v ON v.conversation_id = cm.conversation_id AND v.account = cm.account
        JOIN message m ON m.conversation_id = cm.conversation_id
            AND m.seq > coalesce(r.own_read_seq, 0) AND m.seq > coalesce(v.cleared_seq, 0)
            AND m.sender != cm.account AND m.counts_unread
        WHERE cm.account = $1
            AND NOT EXISTS (SELECT 1 FROM read_ack a
                WHERE a.conversation_id = m.conversation_id AND a.account = cm.account AND a.seq = m.seq)
            AND NOT EXISTS (SELECT 1 FROM deleted_message d
                WHERE d.conversation_id = m.conversation_id AND d.account = cm.account AND d.seq = m.seq)
        """
}
