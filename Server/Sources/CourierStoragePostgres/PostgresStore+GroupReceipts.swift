// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import PostgresNIO

/// Group read receipts on PostgreSQL: the per-message counts a read raises, ack notes, and the read, unread and
/// delivered lists (docs/decisions/0008), under the same locks as the membership changes.

// MARK: Receipts

extension PostgresStore {
    func insertTally(
        _ message: WireMessage,
        audience: Int,
        readCount: Int,
        on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            INSERT INTO receipt_count (conversation_id, seq, message_id, sender, audience, read_count)
            VALUES (\(message.conversation.rawValue), \(message.seq.rawValue), \(message.id.rawValue),
                \(message.sender.rawValue), \(Int64(max(0, audience))), \(Int64(readCount)))
            """,
            logger: logger
        )
    }

    static func tally(_ row: (String, String, Int64, Int64, Int64)) -> ReceiptTally {
        ReceiptTally(
            messageID: MessageID(rawValue: row.0),
            sender: AccountID(rawValue: row.1),
            audience: Int(row.2),
            readCount: Int(row.3)
        )
    }

    /// Counts a reader once for every message asking for receipts that its shared position newly covers: one
    /// `receipt_count` row per such message, whatever the group's size.
    func countReads(
        of mark: ResolvedRead,
        newly: (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq]),
        on connection: PostgresConnection
    ) async throws -> [GroupReceiptChange] {
        let group = mark.conversation.rawValue
        let reader = mark.reader.rawValue
        var changes: [GroupReceiptChange] = []
        func collect(_ rows: PostgresRowSequence) async throws {
            for try await row in rows.decode((String, String, Int64, Int64, Int64).self) {
                changes.append(GroupReceiptChange(seq: Seq(row.4), tally: Self.tally(row)))
            }
        }
        if let range = newly.range {
            try await collect(
                try await connection.query(
                    """
                    UPDATE receipt_count SET read_count = read_count + 1
                    WHERE conversation_id = \(group) AND seq BETWEEN \(range.lowerBound.rawValue)
                        AND \(range.upperBound.rawValue) AND sender <> \(reader)
                        AND NOT (seq = ANY(\(newly.excluding.map(\.rawValue))))
                    RETURNING message_id, sender, audience, read_count, seq
                    """,
                    logger: logger
                )
            )
        }
        if !newly.acks.isEmpty {
            try await collect(
                try await connection.query(
                    """
                    UPDATE receipt_count SET read_count = read_count + 1
                    WHERE conversation_id = \(group) AND seq = ANY(\(newly.acks.map(\.rawValue))) AND sender <> \(reader)
                    RETURNING message_id, sender, audience, read_count, seq
                    """,
                    logger: logger
                )
            )
        }
        changes.sort { $0.seq < $1.seq }
        if let content = mark.content, case .seqs(let acked) = mark.target {
            let acked = Set(acked)
            let seqs = changes.map(\.seq).filter { acked.contains($0) }.map(\.rawValue)
            try await connection.query(
                """
                INSERT INTO ack_content (conversation_id, seq, account, content)
                SELECT \(group), unnest(\(seqs)::bigint[]), \(reader), \(content)
                ON CONFLICT DO NOTHING
                """,
                logger: logger
            )
        }
        return changes
    }
}
