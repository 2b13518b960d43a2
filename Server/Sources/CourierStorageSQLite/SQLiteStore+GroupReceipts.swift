// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import GRDB

/// The counts a group read raises, on SQLite: the read's hot path, so cached statements read in place, the same
/// statements as the shared `CountReadsProcedure` that PostgreSQL runs. Run through the procedure, SQLite carried
/// 160,255 (155,762–160,770) acks per second in `courier-bench group --members 100000` against 190,112
/// (172,412–190,112) this way (docs/benchmarks-history.md, ADR 0020).
extension SQLiteStore {
    static func tally(_ row: Row) -> ReceiptTally {
        ReceiptTally(
            messageID: MessageID(rawValue: row[0]),
            sender: AccountID(rawValue: row[1]),
            audience: row[2],
            readCount: row[3]
        )
    }

    /// Counts a reader once for every message asking for receipts that its shared position newly covers: one
    /// `receipt_count` row per such message, whatever the group's size.
    static func countReads(
        _ db: Database,
        of read: ResolvedRead,
        newly: (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq])
    ) throws -> [ReceiptUpdate] {
        let group = read.conversation.rawValue
        var changes: [ReceiptUpdate] = []
        let change = { (row: Row) in ReceiptUpdate(seq: Seq(row[4] as Int64), tally: tally(row)) }
        if let range = newly.range {
            changes += try Row.all(
                db.cachedStatement(
                    sql: """
                        UPDATE receipt_count SET read_count = read_count + 1
                        WHERE conversation_id = ? AND seq BETWEEN ? AND ? AND sender != ?
                            AND seq NOT IN (SELECT value FROM json_each(?))
                        RETURNING message_id, sender, audience, read_count, seq
                        """
                ),
                arguments: [
                    group, range.lowerBound.rawValue, range.upperBound.rawValue, read.reader.rawValue,
                    SQLJSON.seqList(newly.excluding),
                ],
                change
            )
        }
        for seq in newly.acks {
            changes += try Row.all(
                db.cachedStatement(
                    sql: """
                        UPDATE receipt_count SET read_count = read_count + 1
                        WHERE conversation_id = ? AND seq = ? AND sender != ?
                        RETURNING message_id, sender, audience, read_count, seq
                        """
                ),
                arguments: [group, seq.rawValue, read.reader.rawValue],
                change
            )
        }
        changes.sort { $0.seq < $1.seq }
        if let note = read.note, case .seqs(let named) = read.target {
            let named = Set(named)
            for change in changes where named.contains(change.seq) {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO read_note (conversation_id, seq, account, content) VALUES (?, ?, ?, ?)
                        ON CONFLICT DO NOTHING
                        """
                ).execute(arguments: [group, change.seq.rawValue, read.reader.rawValue, note])
            }
        }
        return changes
    }
}
