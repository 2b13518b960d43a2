// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
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

    enum ReadSettings: HotStatement {
        static let sql = "SELECT conversation_id, send_read_receipts FROM read_setting WHERE account = $1"
    }
}
