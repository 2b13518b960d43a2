// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

/// Groups on PostgreSQL: the same tables and the same derived receipts as SQLite (docs/decisions/0008). Every change
/// to a group's membership or log takes the group's conversation row lock (`FOR UPDATE`) and a group read takes it
/// shared (`FOR SHARE`), so an audience is never counted while a join, a leave or an append is half done; locks are
/// always taken in the order conversation → receipt → receipt_count.
extension PostgresStore: GroupStore {
    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult {
        do {
            return try await createGroupOnce(entry, members: members)
        } catch .conflict {
            // A concurrent creator of the same group (or a retry of this one) committed first.
            return try await createGroupOnce(entry, members: members)
        }
    }

    private func createGroupOnce(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult
    {
        try await transaction { connection in
            if let original = try await original(of: entry, on: connection) { return original }
            let exists =
                try await connection.query(
                    "SELECT 1 FROM conversation WHERE id = \(entry.conversation.rawValue)",
                    logger: logger
                ).decode(Int.self).first { _ in true } != nil
            guard !exists else { throw StorageError.groupRefused(.alreadyExists) }
            let everyone = [entry.sender] + members.filter { $0 != entry.sender }
            try await requireAccounts(everyone, on: connection)
            try await connection.query(
                "INSERT INTO conversation (id, kind, member_count) VALUES (\(entry.conversation.rawValue), 'group', 0)",
                logger: logger
            )
            let result = try await insertEntry(entry, on: connection)
            try await join([entry.sender], result.message, role: .owner, on: connection)
            try await join(Array(everyone.dropFirst()), result.message, role: .member, on: connection)
            return result
        }
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let change = entry.group else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            guard try await lockGroup(group, on: connection) else {
                throw StorageError.groupRefused(.groupNotFound)
            }
            if let original = try await original(of: entry, on: connection) { return original }
            var roles: [AccountID: MemberRole] = [:]
            for try await (account, role) in try await connection.query(
                """
                SELECT account, role FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND account = ANY(\(change.accounts.map(\.rawValue)))
                """,
                logger: logger
            ).decode((String, String).self) {
                roles[AccountID(rawValue: account)] = MemberRole(rawValue: role) ?? .member
            }
            let actorRole = try await memberRow(entry.sender, of: group, on: connection)?.role
            let changed = try GroupRules.checked(change, actor: entry.sender, actorRole: actorRole, roles: roles)
            if change.action == .added { try await requireAccounts(changed, on: connection) }
            let stored = entry.with(group: WireGroupChange(action: change.action, accounts: changed, role: change.role))
            let result = try await insertEntry(stored, on: connection)
            switch change.action {
            case .added:
                try await join(changed, result.message, role: .member, on: connection)
            case .removed, .left:
                for account in changed { try await leave(account, of: group, at: result.message.seq, on: connection) }
            case .roleChanged:
                try await setRole(changed, of: group, to: change.role ?? .member, on: connection)
            case .ownerTransferred:
                try await setRole([changed[0]], of: group, to: .owner, on: connection)
                try await setRole([entry.sender], of: group, to: .member, on: connection)
            case .created:
                break
            }
            return result
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await withPooledConnection { connection in try await memberRow(account, of: group, on: connection) }
    }

    public func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool {
        try await withPooledConnection { connection in
            try await connection.query(
                "SELECT kind FROM conversation WHERE id = \(group.rawValue)",
                logger: logger
            ).decode(String.self).first { _ in true } == ConversationKind.group.rawValue
        }
    }

    public func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int) {
        try await withPooledConnection { connection in
            var members: [GroupMember] = []
            for try await row in try await connection.query(
                """
                SELECT account, role, joined_seq FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND account > \(after?.rawValue ?? "")
                ORDER BY account LIMIT \(limit)
                """,
                logger: logger
            ).decode((String, String, Int64).self) {
                members.append(Self.groupMember(row))
            }
            let total =
                try await connection.query(
                    "SELECT member_count FROM conversation WHERE id = \(group.rawValue)",
                    logger: logger
                ).decode(Int64.self).first { _ in true } ?? 0
            return (members, Int(total))
        }
    }

    public func memberAccounts(of group: ConversationID) async throws(StorageError) -> [AccountID] {
        try await withPooledConnection { connection in
            try await connection.query(
                "SELECT account FROM conversation_member WHERE conversation_id = \(group.rawValue)",
                logger: logger
            ).decode(String.self).reduce(into: [AccountID]()) { $0.append(AccountID(rawValue: $1)) }
        }
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let messageID = entry.receiptRequest else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            guard try await lockGroup(group, on: connection) else {
                throw StorageError.conversationNotFound(group)
            }
            if let original = try await original(of: entry, on: connection) { return original }
            guard
                let target = try await fetchMessages(
                    on: connection,
                    "WHERE id = \(messageID.rawValue) AND conversation_id = \(group.rawValue)"
                ).first
            else { throw StorageError.conversationNotFound(group) }
            guard target.needsReadReceipt != true else { throw StorageError.groupRefused(.alreadyRequested) }
            guard try await memberRow(entry.sender, of: group, on: connection) != nil else {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            // The audience as of now: members who were there at send time (still here, or gone after reading it).
            // Reads hold the group's row shared, so none is half counted while this holds it exclusively.
            let seq = target.seq.rawValue
            let counted =
                try await connection.query(
                    """
                    SELECT count(*), count(*) FILTER (WHERE r.read_seq >= \(seq) OR EXISTS (SELECT 1 FROM read_ack a
                        WHERE a.conversation_id = cm.conversation_id AND a.account = cm.account AND a.seq = \(seq)
                            AND a.shared))
                    FROM conversation_member cm
                    JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
                    WHERE cm.conversation_id = \(group.rawValue) AND cm.joined_seq < \(seq)
                        AND cm.account <> \(target.sender.rawValue)
                    """,
                    logger: logger
                ).decode((Int64, Int64).self).first { _ in true }
            let current: (Int64, Int64) = counted ?? (0, 0)
            let formerReaders = try await formerMembers(of: group, around: target.seq, on: connection)
                .filter { $0.account != target.sender && $0.read(target.seq) != nil }.count
            let result = try await insertEntry(entry, on: connection)
            try await connection.query(
                "UPDATE message SET needs_receipt = TRUE WHERE id = \(messageID.rawValue)",
                logger: logger
            )
            try await insertTally(
                target,
                audience: Int(current.0) + formerReaders,
                readCount: Int(current.1) + formerReaders,
                on: connection
            )
            return result
        }
    }

    public func receiptCounts(
        in group: ConversationID,
        seqs: [Seq]
    ) async throws(StorageError) -> [Seq: ReceiptTally] {
        try await withPooledConnection { connection in
            var tallies: [Seq: ReceiptTally] = [:]
            for try await row in try await connection.query(
                """
                SELECT message_id, sender, audience, read_count, seq FROM receipt_count
                WHERE conversation_id = \(group.rawValue) AND seq = ANY(\(Set(seqs).map(\.rawValue)))
                """,
                logger: logger
            ).decode((String, String, Int64, Int64, Int64).self) {
                tallies[Seq(row.4)] = Self.tally(row)
            }
            return tallies
        }
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        try await withPooledConnection { connection in try await receiptList(query, on: connection) }
    }
}

// MARK: Membership

extension PostgresStore {
    /// Locks a group's conversation row until commit; `false` when there is no such group.
    func lockGroup(_ group: ConversationID, on connection: PostgresConnection) async throws -> Bool {
        try await connection.query(
            "SELECT kind FROM conversation WHERE id = \(group.rawValue) FOR UPDATE",
            logger: logger
        ).decode(String.self).first { _ in true } == ConversationKind.group.rawValue
    }

    func memberRow(
        _ account: AccountID,
        of group: ConversationID,
        on connection: PostgresConnection
    ) async throws -> GroupMember? {
        try await connection.query(
            """
            SELECT account, role, joined_seq FROM conversation_member
            WHERE conversation_id = \(group.rawValue) AND account = \(account.rawValue)
            """,
            logger: logger
        ).decode((String, String, Int64).self).first { _ in true }.map(Self.groupMember)
    }

    static func groupMember(_ row: (String, String, Int64)) -> GroupMember {
        GroupMember(
            account: AccountID(rawValue: row.0),
            role: MemberRole(rawValue: row.1) ?? .member,
            joinedSeq: Seq(row.2)
        )
    }

    /// Throws `accountNotFound` for the first account that is not registered.
    func requireAccounts(_ accounts: [AccountID], on connection: PostgresConnection) async throws {
        let known = try await connection.query(
            "SELECT id FROM account WHERE id = ANY(\(accounts.map(\.rawValue)))",
            logger: logger
        ).decode(String.self).reduce(into: Set<String>()) { $0.insert($1) }
        if let missing = accounts.first(where: { !known.contains($0.rawValue) }) {
            throw StorageError.accountNotFound(missing)
        }
    }

    /// Adds members whose positions start at the entry that added them (nothing sent before counts for them): three
    /// statements whatever the number of accounts.
    func join(
        _ accounts: [AccountID],
        _ entry: WireMessage,
        role: MemberRole,
        on connection: PostgresConnection
    ) async throws {
        guard !accounts.isEmpty else { return }
        let group = entry.conversation.rawValue
        let names = accounts.map(\.rawValue)
        let (seq, time) = (entry.seq.rawValue, entry.time.rawValue)
        try await connection.query(
            """
            INSERT INTO conversation_member (conversation_id, account, role, joined_seq)
            SELECT \(group), unnest(\(names)::text[]), \(role.rawValue), \(seq)
            """,
            logger: logger
        )
        // A joiner starts at the join entry. A row left by a delivery that raced an earlier removal (before
        // deliveries took the group's lock) is reset instead of failing the join for ever.
        try await connection.query(
            """
            INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, read_seq, read_time,
                own_read_seq, own_read_time, read_at, delivered_at)
            SELECT \(group), unnest(\(names)::text[]), \(seq), \(time), \(seq), \(time), \(seq), \(time), \(time),
                \(time)
            ON CONFLICT (conversation_id, account) DO UPDATE SET
                delivered_seq = EXCLUDED.delivered_seq, delivered_time = EXCLUDED.delivered_time,
                read_seq = EXCLUDED.read_seq, read_time = EXCLUDED.read_time,
                own_read_seq = EXCLUDED.own_read_seq, own_read_time = EXCLUDED.own_read_time,
                read_at = EXCLUDED.read_at, delivered_at = EXCLUDED.delivered_at
            """,
            logger: logger
        )
        try await connection.query(
            "UPDATE conversation SET member_count = member_count + \(Int64(accounts.count)) WHERE id = \(group)",
            logger: logger
        )
    }

    /// Removes a member: the messages it had not read drop it from their audience; what it read stays read (its
    /// position is kept, frozen, in `former_member`).
    func leave(
        _ account: AccountID,
        of group: ConversationID,
        at seq: Seq,
        on connection: PostgresConnection
    )
        async throws
    {
        let conversation = group.rawValue
        guard let member = try await memberRow(account, of: group, on: connection) else { return }
        let position = try await connection.query(
            """
            SELECT read_seq, read_at FROM receipt WHERE conversation_id = \(conversation) AND account = \(account.rawValue)
            FOR UPDATE
            """,
            logger: logger
        ).decode((Int64, Int64).self).first { _ in true }
        let readSeq = position?.0 ?? member.joinedSeq.rawValue
        let readAt = position?.1 ?? 0
        var acks: [FormerMember.Ack] = []
        for try await (ackSeq, time) in try await connection.query(
            """
            SELECT seq, time FROM read_ack WHERE conversation_id = \(conversation) AND account = \(account.rawValue)
                AND shared ORDER BY seq
            """,
            logger: logger
        ).decode((Int64, Int64).self) {
            acks.append(FormerMember.Ack(seq: Seq(ackSeq), time: Timestamp(milliseconds: time)))
        }
        try await connection.query(
            """
            UPDATE receipt_count SET audience = audience - 1
            WHERE conversation_id = \(conversation) AND seq > \(max(readSeq, member.joinedSeq.rawValue))
                AND sender <> \(account.rawValue) AND NOT (seq = ANY(\(acks.map(\.seq.rawValue))))
            """,
            logger: logger
        )
        try await connection.query(
            """
            INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks)
            VALUES (\(conversation), \(account.rawValue), \(member.joinedSeq.rawValue), \(seq.rawValue), \(readSeq),
                \(readAt), \(FormerMember.encode(acks)))
            ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
            """,
            logger: logger
        )
        for table in ["read_ack", "receipt", "conversation_member"] {
            try await connection.query(
                "DELETE FROM \(unescaped: table) WHERE conversation_id = \(conversation) AND account = \(account.rawValue)",
                logger: logger
            )
        }
        try await connection.query(
            "UPDATE conversation SET member_count = member_count - 1 WHERE id = \(conversation)",
            logger: logger
        )
    }

    func setRole(
        _ accounts: [AccountID],
        of group: ConversationID,
        to role: MemberRole,
        on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            UPDATE conversation_member SET role = \(role.rawValue)
            WHERE conversation_id = \(group.rawValue) AND account = ANY(\(accounts.map(\.rawValue)))
            """,
            logger: logger
        )
    }

    /// Former members whose membership covered `seq` (they may be readers of it).
    func formerMembers(
        of group: ConversationID,
        around seq: Seq,
        on connection: PostgresConnection
    ) async throws -> [FormerMember] {
        var former: [FormerMember] = []
        for try await (account, readSeq, readAt, acks) in try await connection.query(
            """
            SELECT account, read_seq, read_at, acks FROM former_member
            WHERE conversation_id = \(group.rawValue) AND joined_seq < \(seq.rawValue) AND left_seq > \(seq.rawValue)
            ORDER BY account
            """,
            logger: logger
        ).decode((String, Int64, Int64, String).self) {
            former.append(
                FormerMember(
                    account: AccountID(rawValue: account),
                    readSeq: Seq(readSeq),
                    readAt: Timestamp(milliseconds: readAt),
                    acks: FormerMember.decode(acks)
                )
            )
        }
        return former
    }
}

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
        of mark: ReadMark,
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
            var entry: ReceiptListEntry?
            let row = try await connection.query(
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
            ).decode((Int64, Int64, Int64, Int64, Int64?).self).first { _ in true }
            if let row {
                let readTime = row.0 >= seq ? row.1 : row.4
                switch query.list {
                case .read:
                    if let readTime {
                        entry = ReceiptListEntry(
                            account: account,
                            time: Timestamp(milliseconds: readTime),
                            content: try await content(query.group, query.seq, account, on: connection)
                        )
                    }
                case .unread:
                    entry = readTime == nil ? ReceiptListEntry(account: account) : nil
                default:
                    entry =
                        row.2 >= seq ? ReceiptListEntry(account: account, time: Timestamp(milliseconds: row.3)) : nil
                }
            } else if let time = former.first(where: { $0.account == account })?.read(query.seq) {
                entry = ReceiptListEntry(
                    account: account,
                    time: time,
                    content: try await content(query.group, query.seq, account, on: connection)
                )
            }
            if let entry { entries.append((ReceiptCursor(segment: .filtered, seq: .zero, account: account), entry)) }
        }
        return entries
    }
}
