// Courier — Apache-2.0
public import CourierWire

/// An account's own view of its conversations (ADR 0029): cleared, deleted for it, muted, pinned. Kept in the
/// account's `receipt` row (its stamp makes `sync` bring it) and `deleted_message` rows above the cleared seq.
public protocol ViewStore: Sendable {
    /// Applies `change` in one transaction and returns the view after it. Nothing is written unless `change.account`
    /// is a member of the conversation when the transaction runs (its view is then ``ConversationView/none``).
    /// `deleteSeqs` at or below the cleared seq are already hidden and are not stored.
    func changeView(_ change: ViewChange) async throws(StorageError) -> ConversationView
    /// `account`'s view of `conversation` (``ConversationView/none`` when it has none).
    func view(of account: AccountID, in conversation: ConversationID) async throws(StorageError) -> ConversationView
}

/// What a `changeView` request changes, resolved by the service (message ids to seqs: a message's seq never changes).
public struct ViewChange: Hashable, Sendable {
    public let account: AccountID
    public let conversation: ConversationID
    public var deleteSeqs: [Seq] = []
    /// Clear every entry up to the conversation's newest when the transaction runs.
    public var clear = false
    public var muted: Bool?
    /// Pinned now (at `now`), unpinned, or unchanged.
    public var pinned: Bool?
    public let now: Timestamp

    public init(account: AccountID, conversation: ConversationID, now: Timestamp) {
        self.account = account
        self.conversation = conversation
        self.now = now
    }
}

extension ViewStore where Self: SQLRunner {
    public func changeView(_ change: ViewChange) async throws(StorageError) -> ConversationView {
        let (conversation, account) = (change.conversation.rawValue, change.account.rawValue)
        // Whether the account is a member now, read in the writing transaction.
        let member: SQLQuery = """
            EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = \(conversation) AND account = \(account))
            """
        let cleared: SQLQuery =
            change.clear
            ? "(SELECT last_seq FROM conversation WHERE id = \(conversation))" : "0"
        let muted: Int64? = change.muted.map { $0 ? 1 : 0 }
        let pinnedAt: Int64? = change.pinned.map { $0 ? change.now.rawValue : 0 }
        var queries: [SQLQuery] = [
            """
            INSERT INTO receipt (conversation_id, account, cleared_seq, muted, pinned_at, stamp)
            SELECT \(conversation), \(account), \(cleared), coalesce(\(muted), 0), coalesce(\(pinnedAt), 0), change_stamp()
            WHERE \(member)
            ON CONFLICT (conversation_id, account) DO UPDATE SET
                cleared_seq = CASE WHEN excluded.cleared_seq > receipt.cleared_seq
                    THEN excluded.cleared_seq ELSE receipt.cleared_seq END,
                muted = coalesce(\(muted), receipt.muted),
                pinned_at = coalesce(\(pinnedAt), receipt.pinned_at),
                stamp = change_stamp()
            """
        ]
        if !change.deleteSeqs.isEmpty {
            queries.append(
                """
                INSERT INTO deleted_message (conversation_id, account, seq)
                SELECT m.conversation_id, \(account), m.seq FROM message m
                WHERE m.conversation_id = \(conversation) AND m.seq IN \(list: change.deleteSeqs.map(\.rawValue))
                  AND m.seq > (SELECT cleared_seq FROM receipt WHERE conversation_id = \(conversation)
                    AND account = \(account))
                ON CONFLICT DO NOTHING
                """
            )
        }
        if change.clear {
            queries.append(
                """
                DELETE FROM deleted_message WHERE conversation_id = \(conversation) AND account = \(account)
                  AND seq <= (SELECT cleared_seq FROM receipt WHERE conversation_id = \(conversation)
                    AND account = \(account))
                """
            )
        }
        let read = queries.count
        queries += Self.viewQueries(of: change.account, in: change.conversation)
        if let notify = try notification(
            StoreChange(.viewChanged(change.conversation, account: change.account), origin: "")
        ) {
            queries.append(notify)
        }
        let rows = try await writeRows(queries)
        return try Self.view(rows[read], rows[read + 1])
    }

    public func view(of account: AccountID, in conversation: ConversationID) async throws(StorageError) -> ConversationView {
        let queries = Self.viewQueries(of: account, in: conversation)
        return try Self.view(try await readRows(queries[0]), try await readRows(queries[1]))
    }

    private static func viewQueries(of account: AccountID, in conversation: ConversationID) -> [SQLQuery] {
        let (conversation, account) = (conversation.rawValue, account.rawValue)
        return [
            """
            SELECT cleared_seq, muted, pinned_at FROM receipt WHERE conversation_id = \(conversation)
              AND account = \(account)
            """,
            """
            SELECT d.seq FROM deleted_message d JOIN receipt r ON r.conversation_id = d.conversation_id
              AND r.account = d.account
            WHERE d.conversation_id = \(conversation) AND d.account = \(account) AND d.seq > r.cleared_seq
            ORDER BY d.seq
            """,
        ]
    }

    private static func view(_ head: [SQLRow], _ deleted: [SQLRow]) throws(StorageError) -> ConversationView {
        guard let row = head.first else { return .none }
        return try ConversationView(row: row, deleted: deleted.map { row throws(StorageError) in Seq(try row.int64(0)) })
    }
}

extension ConversationView {
    /// From `cleared_seq, muted, pinned_at` at `column` and the next two, and the deleted seqs above it.
    init(row: SQLRow, at column: Int = 0, deleted: [Seq]) throws(StorageError) {
        let pinnedAt = try row.int64(column + 2)
        self.init(
            cleared: Seq(try row.int64(column)),
            deletedSeqs: deleted,
            muted: try row.int64(column + 1) != 0,
            pinnedAt: pinnedAt == 0 ? nil : Timestamp(milliseconds: pinnedAt)
        )
    }
}
