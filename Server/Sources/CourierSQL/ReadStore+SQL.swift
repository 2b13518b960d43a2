// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Read states and read-receipt settings, written once for every backend that runs ``SQLQuery``s.
extension ReadStore where Self: SQLRunner {
    public func readState(of reader: AccountID, in conversation: ConversationID) async throws(StorageError) -> ReadState {
        try await read(ReadStateProcedure(reader: reader, conversation: conversation))
    }

    /// A member's unread count in every conversation it is in that has unread entries.
    public func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int] {
        var counts: [ConversationID: Int] = [:]
        for row in try await readRows(ReadStatements.unreadCounts(of: account)) {
            counts[ConversationID(rawValue: try row.string(0))] = try row.int(1)
        }
        return counts
    }

    public func readReceiptSettings(of account: AccountID) async throws(StorageError) -> StoredReadReceiptSettings {
        let rows = try await readRows(ReadStatements.settings(of: account)).map { row throws(StorageError) in
            (account, try row.string(0), try row.bool(1))
        }
        return StoredReadReceiptSettings.grouped(rows)[account] ?? .init(sendReadReceipts: true, conversations: [:])
    }

    public func readReceiptSettings(
        of accounts: [AccountID],
        in conversation: ConversationID
    ) async throws(StorageError) -> [AccountID: StoredReadReceiptSettings] {
        StoredReadReceiptSettings.grouped(
            try await readRows(
                """
                SELECT account, conversation_id, send_read_receipts FROM read_setting
                WHERE account IN \(list: accounts.map(\.rawValue)) AND conversation_id IN ('', \(conversation.rawValue))
                """
            ).map { row throws(StorageError) in
                (AccountID(rawValue: try row.string(0)), try row.string(1), try row.bool(2))
            }
        )
    }

    public func setSendReadReceipts(
        _ value: Bool,
        for account: AccountID,
        in conversation: ConversationID?
    ) async throws(StorageError) {
        _ = try await writeRows(
            """
            INSERT INTO read_setting (account, conversation_id, send_read_receipts)
            VALUES (\(account.rawValue), \(conversation?.rawValue ?? ""), \(value))
            ON CONFLICT (account, conversation_id) DO UPDATE SET send_read_receipts = excluded.send_read_receipts
            """
        )
    }
}

/// A reader's own position in a conversation, what it read one by one above it, and its unread count.
struct ReadStateProcedure: SQLProcedure {
    let reader: AccountID
    let conversation: ConversationID
    private var receipts: Nested<MemberReceiptsProcedure>
    private var mine: MemberReceipts?

    init(reader: AccountID, conversation: ConversationID) {
        self.reader = reader
        self.conversation = conversation
        receipts = Nested(MemberReceiptsProcedure(conversation, shared: false, reader))
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<ReadState> {
        guard let mine else {
            switch try receipts.step(rows) {
            case .run(let query): return .run(query)
            case .done(let mine):
                self.mine = mine.receipts
                return .run(
                    "SELECT count(*) \(ReadStatements.unread(by: reader)) AND cm.conversation_id = \(conversation.rawValue)"
                )
            }
        }
        return .done(
            ReadState(
                conversation: conversation,
                watermark: mine.read,
                readSeqs: mine.readSeqs,
                unreadCount: try rows?.first?.int(0) ?? 0
            )
        )
    }
}

/// An account's read state outside a read's own statements.
public enum ReadStatements {
    /// Statements outside a read that run on its path or a sync's — the settings every shared read looks up, the
    /// unread counts of a completed sync — as samples, so that a backend that prepares statements prepares them once
    /// per connection (their text does not depend on the values they bind).
    public static var hot: [SQLQuery] { [settings(of: "a"), unreadCounts(of: "a")] }

    /// An account's read-receipt settings, for itself and per conversation.
    static func settings(of account: AccountID) -> SQLQuery {
        "SELECT conversation_id, send_read_receipts FROM read_setting WHERE account = \(account.rawValue)"
    }

    /// `reader`'s unread count in every conversation of its that has unread entries.
    static func unreadCounts(of reader: AccountID) -> SQLQuery {
        "SELECT m.conversation_id, count(*) \(unread(by: reader)) GROUP BY m.conversation_id"
    }

    /// The entries unread by `reader`, from its memberships (its `WHERE` open for more conditions): entries of others
    /// past its own position and what it cleared that count as unread, not read one by one nor deleted for itself.
    static func unread(by reader: AccountID) -> SQLQuery {
        """
        FROM conversation_member cm
        LEFT JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
        LEFT JOIN conversation_view v ON v.conversation_id = cm.conversation_id AND v.account = cm.account
        JOIN message m ON m.conversation_id = cm.conversation_id
            AND m.seq > coalesce(r.own_read_seq, 0) AND m.seq > coalesce(v.cleared_seq, 0)
            AND m.sender <> cm.account AND m.counts_unread
        WHERE cm.account = \(reader.rawValue)
            AND NOT EXISTS (SELECT 1 FROM read_ack a
                WHERE a.conversation_id = m.conversation_id AND a.account = cm.account AND a.seq = m.seq)
            AND NOT EXISTS (SELECT 1 FROM deleted_message d
                WHERE d.conversation_id = m.conversation_id AND d.account = cm.account AND d.seq = m.seq)
        """
    }
}
