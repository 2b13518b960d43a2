// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import GRDB

/// Group read receipts on SQLite: the per-message counts a read raises, ack notes, and the read, unread and delivered
/// lists (docs/decisions/0008).

// MARK: Receipts

extension SQLiteStore {
    static func insertTally(_ db: Database, _ message: WireMessage, audience: Int, readCount: Int) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO receipt_count (conversation_id, seq, message_id, sender, audience, read_count)
                VALUES (?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            message.conversation.rawValue, message.seq.rawValue, message.id.rawValue, message.sender.rawValue,
            max(0, audience), readCount,
        ])
    }

    static func tally(_ db: Database, _ group: ConversationID, _ seq: Seq) throws -> ReceiptTally? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT message_id, sender, audience, read_count FROM receipt_count
                    WHERE conversation_id = ? AND seq = ?
                    """
            ),
            arguments: [group.rawValue, seq.rawValue]
        ).map(tally)
    }

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
        of mark: ResolvedRead,
        newly: (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq])
    ) throws -> [GroupReceiptChange] {
        let group = mark.conversation.rawValue
        var changes: [GroupReceiptChange] = []
        let change = { (row: Row) in GroupReceiptChange(seq: Seq(row[4] as Int64), tally: tally(row)) }
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
                    group, range.lowerBound.rawValue, range.upperBound.rawValue, mark.reader.rawValue,
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
                arguments: [group, seq.rawValue, mark.reader.rawValue],
                change
            )
        }
        changes.sort { $0.seq < $1.seq }
        if let content = mark.content, case .seqs(let acked) = mark.target {
            let acked = Set(acked)
            for change in changes where acked.contains(change.seq) {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO ack_content (conversation_id, seq, account, content) VALUES (?, ?, ?, ?)
                        ON CONFLICT DO NOTHING
                        """
                ).execute(arguments: [group, change.seq.rawValue, mark.reader.rawValue, content])
            }
        }
        return changes
    }

    static func content(_ db: Database, _ group: ConversationID, _ seq: Seq, _ account: AccountID) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(
                sql: "SELECT content FROM ack_content WHERE conversation_id = ? AND seq = ? AND account = ?"
            ),
            arguments: [group.rawValue, seq.rawValue, account.rawValue]
        )
    }
}

// MARK: Receipt lists

extension SQLiteStore {
    static func receiptList(_ db: Database, _ query: ReceiptListQuery) throws -> ReceiptPage {
        // A filtered list is at most 100 lookups, made once: its page and its total come from the same entries.
        let filtered = query.accounts == nil ? nil : try filteredEntries(db, query)
        var pager = ReceiptListPager(query)
        while let request = pager.next {
            switch request.segment {
            case .acks:
                pager.receive(try ackReaders(db, query, after: request.after?.account, limit: request.limit))
            case .watermarks:
                pager.receive(try positions(db, query, after: request.after, limit: request.limit))
            case .former:
                pager.receive(try formerReaders(db, query, after: request.after?.account, limit: request.limit))
            case .filtered:
                pager.receive(filtered ?? [])
            }
        }
        if let filtered { return pager.page(total: filtered.count) }
        if query.list == .delivered {
            let total = try Int.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT count(*) FROM receipt r
                        JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                        WHERE r.conversation_id = ?1 AND r.delivered_seq >= ?2 AND cm.joined_seq < ?2
                            AND r.account != ?3
                        """
                ),
                arguments: [query.group.rawValue, query.seq.rawValue, query.sender.rawValue]
            )
            return pager.page(total: total ?? 0)
        }
        let tally = try tally(db, query.group, query.seq)
        return pager.page(total: (query.list == .read ? tally?.readCount : tally?.unreadCount) ?? 0)
    }

    /// Former members who read the message, by account.
    static func formerReaders(
        _ db: Database,
        _ query: ReceiptListQuery,
        after: AccountID?,
        limit: Int
    ) throws -> [(cursor: ReceiptCursor, entry: ReceiptListEntry)] {
        try formerMembers(db, of: query.group, around: query.seq)
            .filter { $0.account != query.sender && $0.account > (after ?? "") }
            .compactMap { former in former.read(query.seq).map { (former.account, $0) } }
            .prefix(limit)
            .map { account, time in
                (
                    ReceiptCursor(segment: .former, seq: .zero, account: account),
                    ReceiptListEntry(
                        account: account,
                        time: time,
                        content: try content(db, query.group, query.seq, account)
                    )
                )
            }
    }

    /// Members who read the message one by one (above their watermark).
    static func ackReaders(
        _ db: Database,
        _ query: ReceiptListQuery,
        after: AccountID?,
        limit: Int
    ) throws -> [(cursor: ReceiptCursor, entry: ReceiptListEntry)] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT a.account, a.time, c.content FROM read_ack a
                    JOIN conversation_member cm ON cm.conversation_id = a.conversation_id AND cm.account = a.account
                    LEFT JOIN ack_content c ON c.conversation_id = a.conversation_id AND c.seq = a.seq
                        AND c.account = a.account
                    WHERE a.conversation_id = ?1 AND a.seq = ?2 AND a.shared AND cm.joined_seq < ?2
                        AND a.account != ?3 AND a.account > ?4
                    ORDER BY a.account LIMIT ?5
                    """
            ),
            arguments: [query.group.rawValue, query.seq.rawValue, query.sender.rawValue, after?.rawValue ?? "", limit]
        ).map { row in
            let account = AccountID(rawValue: row[0])
            return (
                ReceiptCursor(segment: .acks, seq: .zero, account: account),
                ReceiptListEntry(account: account, time: Timestamp(milliseconds: row[1]), content: row[2])
            )
        }
    }

    /// Current members by watermark position: readers (read seq ≥ the message's), non-readers (below it, without a
    /// one-by-one ack), or receivers (delivered seq ≥ it). One range of the `receipt_by_read` or
    /// `receipt_by_delivered` index.
    static func positions(
        _ db: Database,
        _ query: ReceiptListQuery,
        after: ReceiptCursor?,
        limit: Int
    ) throws -> [(cursor: ReceiptCursor, entry: ReceiptListEntry)] {
        let (column, time, condition): (String, String, String)
        switch query.list {
        case .unread:
            (column, time, condition) = (
                "read_seq", "NULL",
                """
                r.read_seq < ?2 AND NOT EXISTS (SELECT 1 FROM read_ack a WHERE a.conversation_id = r.conversation_id
                    AND a.account = r.account AND a.seq = ?2 AND a.shared)
                """
            )
        case .delivered:
            (column, time, condition) = ("delivered_seq", "r.delivered_at", "r.delivered_seq >= ?2")
        default:
            (column, time, condition) = ("read_seq", "r.read_at", "r.read_seq >= ?2")
        }
        let content =
            query.list == .read
            ? "(SELECT content FROM ack_content c WHERE c.conversation_id = ?1 AND c.seq = ?2 AND c.account = r.account)"
            : "NULL"
        return try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT r.account, \(time), r.\(column), \(content) FROM receipt r
                    JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                    WHERE r.conversation_id = ?1 AND \(condition) AND cm.joined_seq < ?2 AND r.account != ?3
                        AND (r.\(column), r.account) > (?4, ?5)
                    ORDER BY r.\(column), r.account LIMIT ?6
                    """
            ),
            arguments: [
                query.group.rawValue, query.seq.rawValue, query.sender.rawValue, after?.seq.rawValue ?? -1,
                after?.account.rawValue ?? "", limit,
            ]
        ).map { row in
            let account = AccountID(rawValue: row[0])
            return (
                ReceiptCursor(segment: .watermarks, seq: Seq(row[2] as Int64), account: account),
                ReceiptListEntry(
                    account: account,
                    time: (row[1] as Int64?).map(Timestamp.init(milliseconds:)),
                    content: row[3]
                )
            )
        }
    }

    /// The list among the query's accounts, by account: each one looked up (at most 100).
    static func filteredEntries(
        _ db: Database,
        _ query: ReceiptListQuery
    ) throws -> [(cursor: ReceiptCursor, entry: ReceiptListEntry)] {
        let former = query.list == .read ? try formerMembers(db, of: query.group, around: query.seq) : []
        var entries: [(cursor: ReceiptCursor, entry: ReceiptListEntry)] = []
        for account in query.accounts ?? [] where account != query.sender {
            let position = try Row.first(
                db.cachedStatement(
                    sql: """
                        SELECT r.read_seq, r.read_at, r.delivered_seq, r.delivered_at,
                            (SELECT a.time FROM read_ack a WHERE a.conversation_id = r.conversation_id
                                AND a.account = r.account AND a.seq = ?2 AND a.shared)
                        FROM receipt r
                        JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                        WHERE r.conversation_id = ?1 AND r.account = ?3 AND cm.joined_seq < ?2
                        """
                ),
                arguments: [query.group.rawValue, query.seq.rawValue, account.rawValue]
            ) { row in
                ListPosition(
                    readSeq: Seq(row[0] as Int64),
                    readAt: Timestamp(milliseconds: row[1]),
                    deliveredSeq: Seq(row[2] as Int64),
                    deliveredAt: Timestamp(milliseconds: row[3]),
                    ackTime: (row[4] as Int64?).map(Timestamp.init(milliseconds:))
                )
            }
            guard let placement = query.placement(of: position, former: former.first { $0.account == account }) else {
                continue
            }
            let content = placement.carriesContent ? try content(db, query.group, query.seq, account) : nil
            entries.append(
                (
                    ReceiptCursor(segment: .filtered, seq: .zero, account: account),
                    ReceiptListEntry(account: account, time: placement.time, content: content)
                )
            )
        }
        return entries
    }
}
