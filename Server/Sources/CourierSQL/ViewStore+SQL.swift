// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

extension ViewStore where Self: SQLRunner {
    public func changeView(_ write: ViewWrite) async throws(StorageError) -> Change? {
        let (conversation, account) = (write.conversation.rawValue, write.account.rawValue)
        // Whether the account is a member now, read in the writing transaction. The conversation's row is locked first
        // (PostgreSQL), as a membership change locks it: a leave that commits meanwhile is waited for, so no view is
        // written for a membership that ended, and the two take their locks in one order.
        let member: SQLQuery = """
            EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = \(conversation) AND account = \(account))
            """
        let cleared: SQLQuery = write.clear ? "(SELECT last_seq FROM conversation WHERE id = \(conversation))" : "0"
        let ownCleared: SQLQuery = """
            (SELECT cleared_seq FROM conversation_view WHERE conversation_id = \(conversation) AND account = \(account))
            """
        // Hidden up to the newest entry now (0: shown); NULL keeps what is stored.
        let hidden: SQLQuery =
            switch write.hidden {
            case true?: "(SELECT last_seq FROM conversation WHERE id = \(conversation))"
            case false?: "0"
            case nil: "NULL"
            }
        let muted: Int64? = write.muted.map { $0 ? 1 : 0 }
        let pinnedAt: Int64? = write.pinned.map { $0 ? write.now.rawValue : 0 }
        var queries: [SQLQuery] = [
            "SELECT \(member) FROM conversation WHERE id = \(conversation) \(lockRows: ())",
            """
            INSERT INTO conversation_view (conversation_id, account, cleared_seq, muted, pinned_at, hidden_seq, stamp)
            SELECT \(conversation), \(account), \(cleared), coalesce(\(muted), 0), coalesce(\(pinnedAt), 0),
                coalesce(\(hidden), 0), change_stamp()
            WHERE \(member)
            ON CONFLICT (conversation_id, account) DO UPDATE SET
                cleared_seq = CASE WHEN excluded.cleared_seq > conversation_view.cleared_seq
                    THEN excluded.cleared_seq ELSE conversation_view.cleared_seq END,
                muted = coalesce(\(muted), conversation_view.muted),
                pinned_at = coalesce(\(pinnedAt), conversation_view.pinned_at),
                hidden_seq = coalesce(\(hidden), conversation_view.hidden_seq),
                stamp = change_stamp()
            """,
        ]
        if !write.deleteSeqs.isEmpty {
            queries.append(
                """
                INSERT INTO deleted_message (conversation_id, account, seq)
                SELECT m.conversation_id, \(account), m.seq FROM message m
                WHERE m.conversation_id = \(conversation) AND m.seq IN \(list: write.deleteSeqs.map(\.rawValue))
                  AND m.seq > \(ownCleared)
                ON CONFLICT DO NOTHING
                """
            )
        }
        if write.clear {
            queries.append(
                """
                DELETE FROM deleted_message WHERE conversation_id = \(conversation) AND account = \(account)
                  AND seq <= \(ownCleared)
                """
            )
        }
        let read = queries.count
        queries.append(Self.viewQuery(of: write.account, in: write.conversation))
        if let notify = try notification(.view(write.conversation, account: write.account)) {
            queries.append(notify)
        }
        let rows = try await writeRows(queries)
        guard try rows[0].first?.bool(0) == true else { return nil }
        return .viewChanged(write.conversation, account: write.account, view: try ConversationView(rows[read]))
    }

    public func view(of account: AccountID, in conversation: ConversationID) async throws(StorageError) -> ConversationView {
        try ConversationView(try await readRows(Self.viewQuery(of: account, in: conversation)))
    }

    /// The view in one statement (one snapshot): its row, and one row per entry deleted above its cleared seq.
    private static func viewQuery(of account: AccountID, in conversation: ConversationID) -> SQLQuery {
        """
        SELECT v.cleared_seq, v.muted, v.pinned_at, v.hidden_seq, d.seq FROM conversation_view v
        LEFT JOIN deleted_message d ON d.conversation_id = v.conversation_id AND d.account = v.account
            AND d.seq > v.cleared_seq
        WHERE v.conversation_id = \(conversation.rawValue) AND v.account = \(account.rawValue)
        ORDER BY d.seq
        """
    }
}

extension ConversationView {
    /// From ``ViewStore``'s one-statement read: none without a row.
    init(_ rows: [SQLRow]) throws(StorageError) {
        guard let head = rows.first else {
            self = .none
            return
        }
        var deleted: [Seq] = []
        for row in rows { if let seq = try row.optionalInt64(4) { deleted.append(Seq(seq)) } }
        try self.init(row: head, deleted: deleted)
    }

    /// From `cleared_seq, muted, pinned_at, hidden_seq` at `column` and the next three (a missing row's NULLs: none),
    /// and the deleted seqs above it.
    init(row: SQLRow, at column: Int = 0, deleted: [Seq]) throws(StorageError) {
        let pinnedAt = try row.optionalInt64(column + 2) ?? 0
        let hidden = try row.optionalInt64(column + 3) ?? 0
        self.init(
            cleared: Seq(try row.optionalInt64(column) ?? 0),
            deletedSeqs: deleted,
            muted: try row.optionalInt64(column + 1) ?? 0 != 0,
            pinnedAt: pinnedAt == 0 ? nil : Timestamp(milliseconds: pinnedAt),
            hiddenUpTo: hidden == 0 ? nil : Seq(hidden)
        )
    }
}
