// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
public import CourierWire

/// One page of a message's read, unread or delivered list (docs/decisions/0008), written once for every backend: the
/// ``ReceiptListPager`` stitches the segments, each one indexed range query; a list filtered by accounts is two
/// lookups (former members, then the accounts' positions); the total comes from the message's tally, or a count of
/// receivers for the delivered list.
public struct ReceiptListProcedure: SQLProcedure {
    public typealias Entry = (cursor: ReceiptCursor, entry: ReceiptListEntry)

    private enum State {
        case start
        case filterFormer
        case filterPositions([AccountID: (former: FormerMember, content: String?)])
        case segment(ReceiptCursor.Segment)
        case total
    }

    private let query: ReceiptListQuery
    private var pager: ReceiptListPager
    private var state = State.start
    private var filtered: [Entry]?

    public init(_ query: ReceiptListQuery) {
        self.query = query
        pager = ReceiptListPager(query)
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<ReceiptPage> {
        let rows = rows ?? []
        switch state {
        case .start:
            if query.accounts != nil {
                guard query.list == .read else { return askFilteredPositions(former: [:]) }
                state = .filterFormer
                return .run(FormerMember.query(of: query.group, around: query.seq, content: true))
            }
        case .filterFormer:
            var former: [AccountID: (former: FormerMember, content: String?)] = [:]
            for row in rows {
                let member = try FormerMember(row)
                former[member.account] = (member, try row.optionalString(4))
            }
            return askFilteredPositions(former: former)
        case .filterPositions(let former):
            filtered = try filteredEntries(rows, former: former)
        case .segment(let segment):
            pager.receive(try entries(of: segment, rows))
        case .total:
            let total: Int? =
                switch query.list {
                case .delivered: try rows.first?.int(0)
                case .read: try rows.first.map(ReceiptTally.init)?.readCount
                default: try rows.first.map(ReceiptTally.init)?.unreadCount
                }
            return .done(pager.page(total: total ?? 0))
        }
        while let request = pager.next {
            guard request.segment != .filtered else {
                pager.receive(filtered ?? [])
                continue
            }
            state = .segment(request.segment)
            return .run(segmentQuery(request))
        }
        if let filtered { return .done(pager.page(total: filtered.count)) }
        state = .total
        guard query.list == .delivered else { return .run(ReceiptTally.query(query.group, seqs: [query.seq])) }
        return .run(
            """
            SELECT count(*) FROM receipt r
            JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
            WHERE r.conversation_id = \(query.group.rawValue) AND r.delivered_seq >= \(query.seq.rawValue)
                AND cm.joined_seq < \(query.seq.rawValue) AND r.account <> \(query.sender.rawValue)
            """
        )
    }

    /// The query's accounts that are members who joined before the message, with their positions.
    private mutating func askFilteredPositions(
        former: [AccountID: (former: FormerMember, content: String?)]
    ) -> SQLStep<ReceiptPage> {
        state = .filterPositions(former)
        let (group, seq) = (query.group.rawValue, query.seq.rawValue)
        return .run(
            """
            SELECT r.account, r.read_seq, r.read_at, r.delivered_seq, r.delivered_at,
                (SELECT a.time FROM read_ack a WHERE a.conversation_id = r.conversation_id
                    AND a.account = r.account AND a.seq = \(seq) AND a.shared),
                (SELECT c.content FROM read_note c WHERE c.conversation_id = r.conversation_id AND c.seq = \(seq)
                    AND c.account = r.account)
            FROM receipt r
            JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
            WHERE r.conversation_id = \(group) AND r.account IN \(list: (query.accounts ?? []).map(\.rawValue))
                AND cm.joined_seq < \(seq)
            """
        )
    }

    /// The list among the query's accounts, by account.
    private func filteredEntries(
        _ rows: [SQLRow],
        former: [AccountID: (former: FormerMember, content: String?)]
    ) throws(StorageError) -> [Entry] {
        var positions: [AccountID: (position: ListPosition, content: String?)] = [:]
        for row in rows {
            positions[AccountID(rawValue: try row.string(0))] = (
                ListPosition(
                    readSeq: Seq(try row.int64(1)),
                    readAt: Timestamp(milliseconds: try row.int64(2)),
                    deliveredSeq: Seq(try row.int64(3)),
                    deliveredAt: Timestamp(milliseconds: try row.int64(4)),
                    ackTime: try row.optionalInt64(5).map(Timestamp.init(milliseconds:))
                ),
                try row.optionalString(6)
            )
        }
        return (query.accounts ?? []).filter { $0 != query.sender }.compactMap { account in
            let position = positions[account]
            let formerMember = former[account]
            guard let placement = query.placement(of: position?.position, former: formerMember?.former) else {
                return nil
            }
            let content = placement.carriesContent ? (position?.content ?? formerMember?.content) : nil
            return (
                ReceiptCursor(segment: .filtered, seq: .zero, account: account),
                ReceiptListEntry(account: account, time: placement.time, content: content)
            )
        }
    }

    /// The statement that answers `request`: one range of an index.
    private func segmentQuery(_ request: ReceiptListPager.Request) -> SQLQuery {
        let (group, seq, sender) = (query.group.rawValue, query.seq.rawValue, query.sender.rawValue)
        switch request.segment {
        case .acks:
            // Members who read the message one by one (above their watermark), by account.
            return """
                SELECT a.account, a.time, c.content FROM read_ack a
                JOIN conversation_member cm ON cm.conversation_id = a.conversation_id AND cm.account = a.account
                LEFT JOIN read_note c ON c.conversation_id = a.conversation_id AND c.seq = a.seq
                    AND c.account = a.account
                WHERE a.conversation_id = \(group) AND a.seq = \(seq) AND a.shared AND cm.joined_seq < \(seq)
                    AND a.account <> \(sender) AND a.account > \(request.after?.account.rawValue ?? "")
                ORDER BY a.account LIMIT \(request.limit)
                """
        case .former:
            // Former members who read it, by account: filtered here (a group has few).
            return FormerMember.query(of: query.group, around: query.seq, content: true)
        default:
            // Current members by watermark position: readers (read seq ≥ the message's), non-readers (below it,
            // without a one-by-one ack), or receivers (delivered seq ≥ it). One range of the `receipt_by_read` or
            // `receipt_by_delivered` index.
            let (column, time, condition, content): (String, String, SQLQuery, SQLQuery)
            switch query.list {
            case .unread:
                (column, time, content) = ("read_seq", "NULL", "NULL")
                condition = """
                    r.read_seq < \(seq) AND NOT EXISTS (SELECT 1 FROM read_ack a
                        WHERE a.conversation_id = r.conversation_id AND a.account = r.account AND a.seq = \(seq)
                            AND a.shared)
                    """
            case .delivered:
                (column, time, condition, content) = ("delivered_seq", "r.delivered_at", "r.delivered_seq >= \(seq)", "NULL")
            default:
                (column, time, condition) = ("read_seq", "r.read_at", "r.read_seq >= \(seq)")
                content = """
                    (SELECT content FROM read_note c WHERE c.conversation_id = r.conversation_id AND c.seq = \(seq)
                        AND c.account = r.account)
                    """
            }
            let after = request.after
            return """
                SELECT r.account, \(unescaped: time), r.\(unescaped: column), \(content) FROM receipt r
                JOIN conversation_member cm ON cm.conversation_id = r.conversation_id AND cm.account = r.account
                WHERE r.conversation_id = \(group) AND \(condition) AND cm.joined_seq < \(seq) AND r.account <> \(sender)
                    AND (r.\(unescaped: column), r.account) > (\(after?.seq.rawValue ?? -1), \(after?.account.rawValue ?? ""))
                ORDER BY r.\(unescaped: column), r.account LIMIT \(request.limit)
                """
        }
    }

    /// The rows of a segment's statement as list entries, in the segment's order.
    private func entries(of segment: ReceiptCursor.Segment, _ rows: [SQLRow]) throws(StorageError) -> [Entry] {
        switch segment {
        case .acks:
            return try rows.map { row throws(StorageError) in
                let account = AccountID(rawValue: try row.string(0))
                return (
                    ReceiptCursor(segment: .acks, seq: .zero, account: account),
                    ReceiptListEntry(
                        account: account,
                        time: Timestamp(milliseconds: try row.int64(1)),
                        content: try row.optionalString(2)
                    )
                )
            }
        case .former:
            let after = pager.next?.after?.account ?? ""
            var entries: [Entry] = []
            for row in rows {
                let former = try FormerMember(row)
                guard former.account != query.sender, former.account > after, let time = former.read(query.seq) else {
                    continue
                }
                entries.append(
                    (
                        ReceiptCursor(segment: .former, seq: .zero, account: former.account),
                        ReceiptListEntry(account: former.account, time: time, content: try row.optionalString(4))
                    )
                )
            }
            return Array(entries.prefix(pager.next?.limit ?? 0))
        default:
            return try rows.map { row throws(StorageError) in
                let account = AccountID(rawValue: try row.string(0))
                return (
                    ReceiptCursor(segment: .watermarks, seq: Seq(try row.int64(2)), account: account),
                    ReceiptListEntry(
                        account: account,
                        time: try row.optionalInt64(1).map(Timestamp.init(milliseconds:)),
                        content: try row.optionalString(3)
                    )
                )
            }
        }
    }
}

extension FormerMember {
    /// Former members whose membership covered `seq` (they may be readers of it), by account; with `content`, each
    /// one's note on the message as a fifth column.
    public static func query(of group: ConversationID, around seq: Seq, content: Bool = false) -> SQLQuery {
        let note: SQLQuery =
            content
            ? """
            , (SELECT c.content FROM read_note c WHERE c.conversation_id = f.conversation_id AND c.seq = \(seq.rawValue)
                AND c.account = f.account)
            """
            : ""
        return """
            SELECT f.account, f.read_seq, f.read_at, f.acks\(note) FROM former_member f
            WHERE f.conversation_id = \(group.rawValue) AND f.joined_seq < \(seq.rawValue) AND f.left_seq > \(seq.rawValue)
            ORDER BY f.account
            """
    }

    /// A former member from the first four columns of ``query(of:around:content:)``.
    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            account: AccountID(rawValue: try row.string(0)),
            readSeq: Seq(try row.int64(1)),
            readAt: Timestamp(milliseconds: try row.int64(2)),
            acks: FormerMember.decode(try row.string(3))
        )
    }
}

extension ReceiptTally {
    /// The tallies of the messages at `seqs` in `group` that ask for receipts: ``init(_:)`` reads each row, its seq
    /// in the fifth column.
    public static func query(_ group: ConversationID, seqs: [Seq]) -> SQLQuery {
        """
        SELECT message_id, sender, audience, read_count, seq FROM receipt_count
        WHERE conversation_id = \(group.rawValue) AND seq IN \(list: seqs.map(\.rawValue))
        """
    }

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            messageID: MessageID(rawValue: try row.string(0)),
            sender: AccountID(rawValue: try row.string(1)),
            audience: try row.int(2),
            readCount: try row.int(3)
        )
    }
}
