// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func recall(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        try await append(entry)
    }

    public func senderCopies(
        of messages: [MessageID],
        sender: AccountID
    ) async throws(StorageError) -> [MessageID: SenderCopy] {
        guard !messages.isEmpty else { return [:] }
        return try await withPooledConnection { connection in
            var copies: [MessageID: SenderCopy] = [:]
            let rows = try await connection.query(
                """
                SELECT message_id, body, quote FROM sender_copy
                WHERE sender = \(sender.rawValue) AND message_id = ANY(\(messages.map(\.rawValue))::text[])
                """,
                logger: logger
            )
            for try await (id, body, quote) in rows.decode((String, String, String?).self) {
                copies[MessageID(rawValue: id)] = SenderCopy(body: body, quote: quote)
            }
            return copies
        }
    }
}
