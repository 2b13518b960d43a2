// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func readReceiptSettings(
        of account: AccountID
    ) async throws(StorageError) -> StoredReadReceiptSettings {
        try await withPooledConnection { connection in
            var rows: [(AccountID, String, Bool)] = []
            for row in try await connection.run(ReadSettings.self, .of(account.rawValue), logger: logger) {
                let (id, value) = try row.decode((String, Bool).self)
                rows.append((account, id, value))
            }
            return StoredReadReceiptSettings.grouped(rows)[account] ?? .init(sendReadReceipts: true, conversations: [:])
        }
    }

    public func readReceiptSettings(
        of accounts: [AccountID],
        in conversation: ConversationID
    ) async throws(StorageError) -> [AccountID: StoredReadReceiptSettings] {
        try await withPooledConnection { connection in
            var rows: [(AccountID, String, Bool)] = []
            for try await (account, id, value) in try await connection.query(
                """
                SELECT account, conversation_id, send_read_receipts FROM read_setting
                WHERE account = ANY(\(accounts.map(\.rawValue))) AND conversation_id IN ('', \(conversation.rawValue))
                """,
                logger: logger
            ).decode((String, String, Bool).self) {
                rows.append((AccountID(rawValue: account), id, value))
            }
            return StoredReadReceiptSettings.grouped(rows)
        }
    }

    public func setSendReadReceipts(
        _ value: Bool,
        for account: AccountID,
        in conversation: ConversationID?
    ) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                """
                INSERT INTO read_setting (account, conversation_id, send_read_receipts)
                VALUES (\(account.rawValue), \(conversation?.rawValue ?? ""), \(value))
                ON CONFLICT (account, conversation_id) DO UPDATE SET send_read_receipts = EXCLUDED.send_read_receipts
                """,
                logger: logger
            )
        }
    }
    enum ReadSettings: HotStatement {
        static let sql = "SELECT conversation_id, send_read_receipts FROM read_setting WHERE account = $1"
    }
}
