// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func messages(
        in conversation: ConversationID,
        after seq: Seq,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    {
        try await withPooledConnection { connection in
            try await fetchMessages(
                on: connection,
                "WHERE conversation_id = \(conversation.rawValue) AND seq > \(seq.rawValue) ORDER BY seq LIMIT \(limit)"
            )
        }
    }

    public func messages(
        in conversation: ConversationID,
        before seq: Seq?,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    {
        try await withPooledConnection { connection in
            let before = seq?.rawValue ?? Int64.max
            return try await fetchMessages(
                on: connection,
                "WHERE conversation_id = \(conversation.rawValue) AND seq < \(before) ORDER BY seq DESC LIMIT \(limit)"
            ).reversed()
        }
    }

    public func message(_ id: MessageID) async throws(StorageError) -> WireMessage? {
        try await withPooledConnection { connection in
            try await fetchMessages(on: connection, "WHERE id = \(id.rawValue)").first
        }
    }

    /// Messages matching `clause` (a `WHERE …` continuation with binds).
    func fetchMessages(on connection: PostgresConnection, _ clause: PostgresQuery) async throws -> [WireMessage] {
        var query: PostgresQuery = """
            SELECT id, conversation_id, seq, client_id, sender, time, body, reply_to, quote, recall, recalled,
                needs_receipt, group_change, receipt_request, type
            FROM message\u{20}
            """
        query.sql += clause.sql
        query.binds = clause.binds
        var messages: [WireMessage] = []
        let rows = try await connection.query(query, logger: logger)
        for try await row in rows.decode(
            (
                String, String, Int64, String, String, Int64, String, String?, String?, String?, Bool, Bool, String?,
                String?, String?
            ).self
        ) {
            let (id, conversation, seq, clientID, sender, time, body, replyTo, quote, recall, recalled) =
                (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10)
            messages.append(
                WireMessage(
                    id: MessageID(rawValue: id),
                    conversation: ConversationID(rawValue: conversation),
                    seq: Seq(seq),
                    clientID: ClientMessageID(rawValue: clientID),
                    sender: AccountID(rawValue: sender),
                    time: Timestamp(milliseconds: time),
                    type: row.14,
                    body: body,
                    replyTo: replyTo.map(MessageID.init(rawValue:)),
                    quote: quote,
                    recall: try EntryJSON.decode(recall),
                    recalled: recalled ? true : nil,
                    needsReadReceipt: row.11 ? true : nil,
                    group: try EntryJSON.decode(WireGroupChange.self, row.12),
                    receiptRequest: row.13.map(MessageID.init(rawValue:))
                )
            )
        }
        return messages
    }
}
