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

    func content(
        _ group: ConversationID,
        _ seq: Seq,
        _ account: AccountID,
        on connection: PostgresConnection
    ) async throws -> String? {
        try await connection.query(
            """
            SELECT content FROM ack_content
            WHERE conversation_id = \(group.rawValue) AND seq = \(seq.rawValue) AND account = \(account.rawValue)
            """,
            logger: logger
        ).decode(String.self).first { _ in true }
    }
}

// MARK: Receipt lists

extension PostgresStore {
    typealias ListEntry = (cursor: ReceiptCursor, entry: ReceiptListEntry)

    func receiptList(_ query: ReceiptListQuery, on connection: PostgresConnection) async throws -> ReceiptPage {
        // A filtered list is at most 100 lookups, made once: its page and its total come from the same entries.
        let filtered = query.accounts == nil ? nil : try await filteredEntries(query, on: connection)
        var pager = ReceiptListPager(query)
        while let request = pager.next {
            switch request.segment {
            case .acks:
                pager.receive(
                    try await ackReaders(query, after: request.after?.account, limit: request.limit, on: connection)
                )
            case .watermarks:
                pager.receive(try await positions(query, after: request.after, limit: request.limit, on: connection))
            case .former:
                pager.receive(
                    try await formerReaders(query, after: request.after?.account, limit: request.limit, on: connection)
                )
            case .filtered:
                pager.receive(filtered ?? [])
            }
        }
        if let filtered { return pager.page(total: filtered.count) }
        if query.list == .delivered {
            let total = try await connection.query(
                """
                SELECT count(*) FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(query.group.rawValue) AND r.delivered_seq >= \(query.seq.rawValue)
                    AND cm.joined_seq < \(query.seq.rawValue) AND r.account <> \(query.sender.rawValue)
                """,
                logger: logger
            ).decode(Int64.self).first { _ in true }
            return pager.page(total: Int(total ?? 0))
        }
        let tally = try await connection.query(
            """
            SELECT message_id, sender, audience, read_count, seq FROM receipt_count
            WHERE conversation_id = \(query.group.rawValue) AND seq = \(query.seq.rawValue)
            """,
            logger: logger
        ).decode((String, String, Int64, Int64, Int64).self).first { _ in true }.map(Self.tally)
        return pager.page(total: (query.list == .read ? tally?.readCount : tally?.unreadCount) ?? 0)
    }

    /// Former members who read the message, by account.
    func formerReaders(
        _ query: ReceiptListQuery,
        after: AccountID?,
        limit: Int,
        on connection: PostgresConnection
    ) async throws -> [ListEntry] {
        let readers = try await formerMembers(of: query.group, around: query.seq, on: connection)
            .filter { $0.account != query.sender && $0.account > (after ?? "") }
            .compactMap { former in former.read(query.seq).map { (former.account, $0) } }
            .prefix(limit)
        var entries: [ListEntry] = []
        for (account, time) in readers {
            entries.append(
                (
                    ReceiptCursor(segment: .former, seq: .zero, account: account),
                    ReceiptListEntry(
                        account: account,
                        time: time,
                        content: try await content(query.group, query.seq, account, on: connection)
                    )
                )
            )
        }
        return entries
    }

    /// Members who read the message one by one (above their watermark).
    func ackReaders(
        _ query: ReceiptListQuery,
        after: AccountID?,
        limit: Int,
        on connection: PostgresConnection
    ) async throws -> [ListEntry] {
        var entries: [ListEntry] = []
        let seq = query.seq.rawValue
        for try await (account, time, content) in try await connection.query(
            """
            SELECT a.account, a.time, c.content FROM read_ack a
            JOIN conversation_member cm ON cm.conversation_id = a.conversation_id AND cm.account = a.account
            LEFT JOIN ack_content c ON c.conversation_id = a.conversation_id AND c.seq = a.seq AND c.account = a.account
            WHERE a.conversation_id = \(query.group.rawValue) AND a.seq = \(seq) AND a.shared AND cm.joined_seq < \(seq)
                AND a.account <> \(query.sender.rawValue) AND a.account > \(after?.rawValue ?? "")
            ORDER BY a.account LIMIT \(limit)
            """,
            logger: logger
        ).decode((String, Int64, String?).self) {
            let account = AccountID(rawValue: account)
            entries.append(
                (
                    ReceiptCursor(segment: .acks, seq: .zero, account: account),
                    ReceiptListEntry(account: account, time: Timestamp(milliseconds: time), content: content)
                )
            )
        }
        return entries
    }

    /// Current members by watermark position: readers (read seq ≥ the message's), non-readers (below it, without a
    /// one-by-one ack), or receivers (delivered seq ≥ it). One range of the `receipt_by_read` or
    /// `receipt_by_delivered` index.
    func positions(
        _ query: ReceiptListQuery,
        after: ReceiptCursor?,
        limit: Int,
        on connection: PostgresConnection
    ) async throws -> [ListEntry] {
        let seq = query.seq.rawValue
        let group = query.group.rawValue
        var sql: PostgresQuery
        switch query.list {
        case .unread:
            sql = """
                SELECT r.account, NULL::bigint, r.read_seq, NULL::text FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(group) AND r.read_seq < \(seq) AND NOT EXISTS (SELECT 1 FROM read_ack a
                    WHERE a.conversation_id = r.conversation_id AND a.account = r.account AND a.seq = \(seq) AND a.shared)
                    AND cm.joined_seq < \(seq) AND r.account <> \(query.sender.rawValue)
                    AND (r.read_seq, r.account) > (\(after?.seq.rawValue ?? -1), \(after?.account.rawValue ?? ""))
                ORDER BY r.read_seq, r.account LIMIT \(limit)
                """
        case .delivered:
            sql = """
                SELECT r.account, r.delivered_at, r.delivered_seq, NULL::text FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(group) AND r.delivered_seq >= \(seq)
                    AND cm.joined_seq < \(seq) AND r.account <> \(query.sender.rawValue)
                    AND (r.delivered_seq, r.account) > (\(after?.seq.rawValue ?? -1), \(after?.account.rawValue ?? ""))
                ORDER BY r.delivered_seq, r.account LIMIT \(limit)
                """
        default:
            sql = """
                SELECT r.account, r.read_at, r.read_seq, (SELECT content FROM ack_content c
                    WHERE c.conversation_id = r.conversation_id AND c.seq = \(seq) AND c.account = r.account)
                FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(group) AND r.read_seq >= \(seq)
                    AND cm.joined_seq < \(seq) AND r.account <> \(query.sender.rawValue)
                    AND (r.read_seq, r.account) > (\(after?.seq.rawValue ?? -1), \(after?.account.rawValue ?? ""))
                ORDER BY r.read_seq, r.account LIMIT \(limit)
                """
        }
        var entries: [ListEntry] = []
        for try await (account, time, position, content) in try await connection.query(sql, logger: logger)
            .decode((String, Int64?, Int64, String?).self)
        {
            let account = AccountID(rawValue: account)
            entries.append(
                (
                    ReceiptCursor(segment: .watermarks, seq: Seq(position), account: account),
                    ReceiptListEntry(account: account, time: time.map(Timestamp.init(milliseconds:)), content: content)
                )
            )
        }
        return entries
    }

    /// The list among the query's accounts, by account: each one looked up (at most 100).
    func filteredEntries(_ query: ReceiptListQuery, on connection: PostgresConnection) async throws -> [ListEntry] {
        let former =
            query.list == .read ? try await formerMembers(of: query.group, around: query.seq, on: connection) : []
        let seq = query.seq.rawValue
        var entries: [ListEntry] = []
        for account in query.accounts ?? [] where account != query.sender {
            let position = try await connection.query(
                """
                SELECT r.read_seq, r.read_at, r.delivered_seq, r.delivered_at,
                    (SELECT a.time FROM read_ack a WHERE a.conversation_id = r.conversation_id
                        AND a.account = r.account AND a.seq = \(seq) AND a.shared)
                FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(query.group.rawValue) AND r.account = \(account.rawValue)
                    AND cm.joined_seq < \(seq)
                """,
                logger: logger
            ).decode((Int64, Int64, Int64, Int64, Int64?).self).first { _ in true }.map { row in
                ListPosition(
                    readSeq: Seq(row.0),
                    readAt: Timestamp(milliseconds: row.1),
                    deliveredSeq: Seq(row.2),
                    deliveredAt: Timestamp(milliseconds: row.3),
                    ackTime: row.4.map(Timestamp.init(milliseconds:))
                )
            }
            guard let placement = query.placement(of: position, former: former.first { $0.account == account }) else {
                continue
            }
            let content =
                placement.carriesContent ? try await content(query.group, query.seq, account, on: connection) : nil
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
