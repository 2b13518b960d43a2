// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire
internal import GRDB

extension SQLiteStore: ConversationStore {}

extension SQLiteStore: ReceiptStore {
    public func advanceDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    )
        async throws(StorageError) -> DeliveryOutcome
    {
        try await write { db in
            guard
                let lastSeq = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT last_seq FROM conversation WHERE id = ?"),
                    arguments: [conversation.rawValue]
                )
            else { throw StorageError.conversationNotFound(conversation) }
            if conversation.kind == .group, try Self.memberRow(db, account, of: conversation) == nil {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            guard seq.rawValue <= lastSeq else { throw StorageError.seqBeyondLastMessage(last: Seq(lastSeq)) }
            let time =
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT time FROM message WHERE conversation_id = ? AND seq = ?"),
                    arguments: [conversation.rawValue, seq.rawValue]
                ) ?? 0
            // The invariant lives in SQL: the watermark only moves forward.
            try db.cachedStatement(
                sql: """
                    INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, delivered_at, stamp)
                    VALUES (?, ?, ?, ?, ?, change_stamp())
                    ON CONFLICT (conversation_id, account) DO UPDATE
                    SET delivered_seq = excluded.delivered_seq, delivered_time = excluded.delivered_time,
                        delivered_at = excluded.delivered_at, stamp = excluded.stamp
                    WHERE receipt.delivered_seq < excluded.delivered_seq
                    """
            ).execute(arguments: [conversation.rawValue, account.rawValue, seq.rawValue, time, now.rawValue]
            )
            let advanced = db.changesCount > 0
            let watermark = try Row.first(
                db.cachedStatement(
                    sql: "SELECT delivered_seq, delivered_time FROM receipt WHERE conversation_id = ? AND account = ?"
                ),
                arguments: [conversation.rawValue, account.rawValue],
                { row in Watermark(seq: Seq(row[0] as Int64), time: Timestamp(milliseconds: row[1])) }
            )!
            let outcome = DeliveryOutcome(
                account, in: conversation, watermark: watermark, advanced: advanced && seq > .zero, at: now
            )
            try Self.announce(db, outcome.change)
            return outcome
        }
    }
}

extension SQLiteStore: ChangeStore {
    public func changeCursor() async throws(StorageError) -> ChangeCursor {
        try await read { db in
            let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT store_id, value FROM change_clock"))!
            return ChangeCursor(storeID: row[0], stamp: (row[1] as Int64) + 1)
        }
    }

}
