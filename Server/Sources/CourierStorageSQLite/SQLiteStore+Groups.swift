// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import GRDB

extension SQLiteStore: GroupStore {
    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult {
        try await write { db in
            if let original = try Self.original(db, of: entry) { return original }
            let exists = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?)"),
                arguments: [entry.conversation.rawValue]
            )
            guard exists != true else { throw StorageError.groupRefused(.alreadyExists) }
            let everyone = [entry.sender] + members.filter { $0 != entry.sender }
            try Self.requireAccounts(db, everyone)
            try db.cachedStatement(sql: "INSERT INTO conversation (id, kind, member_count) VALUES (?, 'group', 0)")
                .execute(arguments: [entry.conversation.rawValue])
            let result = try Self.insert(db, entry)
            for account in everyone {
                try Self.join(
                    db,
                    account,
                    result.message,
                    role: account == entry.sender ? .owner : .member
                )
            }
            return result
        }
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let change = entry.group else { return try await append(entry) }
        return try await write { db in
            if let original = try Self.original(db, of: entry) { return original }
            let group = entry.conversation
            guard try Self.isGroup(db, group) else { throw StorageError.groupRefused(.groupNotFound) }
            var roles: [AccountID: MemberRole] = [:]
            for account in change.accounts {
                if let member = try Self.memberRow(db, account, of: group) { roles[account] = member.role }
            }
            let actorRole = try Self.memberRow(db, entry.sender, of: group)?.role
            let changed = try GroupRules.checked(change, actor: entry.sender, actorRole: actorRole, roles: roles)
            if change.action == .added { try Self.requireAccounts(db, changed) }
            let stored = entry.with(group: WireGroupChange(action: change.action, accounts: changed, role: change.role))
            let result = try Self.insert(db, stored)
            switch change.action {
            case .added:
                for account in changed { try Self.join(db, account, result.message, role: .member) }
            case .removed, .left:
                for account in changed { try Self.leave(db, account, of: group, at: result.message.seq) }
            case .roleChanged:
                for account in changed { try Self.setRole(db, account, of: group, to: change.role ?? .member) }
            case .ownerTransferred:
                try Self.setRole(db, changed[0], of: group, to: .owner)
                try Self.setRole(db, entry.sender, of: group, to: .member)
            case .created:
                break
            }
            return result
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await read { db in try Self.memberRow(db, account, of: group) }
    }

    public func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool {
        try await read { db in try Self.isGroup(db, group) }
    }

    public func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int) {
        try await read { db in
            let members = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT account, role, joined_seq FROM conversation_member
                        WHERE conversation_id = ? AND account > ? ORDER BY account LIMIT ?
                        """
                ),
                arguments: [group.rawValue, after?.rawValue ?? "", limit]
            ).map(Self.groupMember)
            let total =
                try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT member_count FROM conversation WHERE id = ?"),
                    arguments: [group.rawValue]
                ) ?? 0
            return (members, total)
        }
    }

    public func memberAccounts(of group: ConversationID) async throws(StorageError) -> [AccountID] {
        try await read { db in
            try String.fetchAll(
                db.cachedStatement(sql: "SELECT account FROM conversation_member WHERE conversation_id = ?"),
                arguments: [group.rawValue]
            ).map(AccountID.init(rawValue:))
        }
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let messageID = entry.receiptRequest else { return try await append(entry) }
        return try await write { db in
            if let original = try Self.original(db, of: entry) { return original }
            guard
                let target = try Self.fetchMessage(
                    db,
                    where: "id = ? AND conversation_id = ?",
                    [messageID.rawValue, entry.conversation.rawValue]
                )
            else { throw StorageError.conversationNotFound(entry.conversation) }
            guard target.needsReadReceipt != true else { throw StorageError.groupRefused(.alreadyRequested) }
            guard try Self.memberRow(db, entry.sender, of: entry.conversation) != nil else {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            // The audience as of now: members who were there at send time (still here, or gone after reading it).
            let group = entry.conversation.rawValue
            let seq = target.seq.rawValue
            let current = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT count(*), coalesce(sum(r.read_seq >= ?2 OR EXISTS (SELECT 1 FROM read_ack a
                            WHERE a.conversation_id = ?1 AND a.account = cm.account AND a.seq = ?2 AND a.shared)), 0)
                        FROM conversation_member cm
                        JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
                        WHERE cm.conversation_id = ?1 AND cm.joined_seq < ?2 AND cm.account != ?3
                        """
                ),
                arguments: [group, seq, target.sender.rawValue]
            )!
            let formerReaders = try Self.formerMembers(db, of: entry.conversation, around: target.seq)
                .filter { $0.account != target.sender && $0.read(target.seq) != nil }.count
            let result = try Self.insert(db, entry)
            try db.cachedStatement(sql: "UPDATE message SET needs_receipt = 1 WHERE id = ?")
                .execute(arguments: [messageID.rawValue])
            try Self.insertTally(
                db,
                target,
                audience: (current[0] as Int) + formerReaders,
                readCount: (current[1] as Int) + formerReaders
            )
            return result
        }
    }

    public func receiptCounts(
        in group: ConversationID,
        seqs: [Seq]
    ) async throws(StorageError) -> [Seq: ReceiptTally] {
        try await read { db in
            var tallies: [Seq: ReceiptTally] = [:]
            for seq in Set(seqs) {
                if let tally = try Self.tally(db, group, seq) { tallies[seq] = tally }
            }
            return tallies
        }
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        try await read { db in try Self.receiptList(db, query) }
    }
}

// MARK: Membership

extension SQLiteStore {
    static func isGroup(_ db: Database, _ group: ConversationID) throws -> Bool {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT kind FROM conversation WHERE id = ?"),
            arguments: [group.rawValue]
        ) == ConversationKind.group.rawValue
    }

    static func memberRow(_ db: Database, _ account: AccountID, of group: ConversationID) throws -> GroupMember? {
        try Row.first(
            db.cachedStatement(
                sql: """
                    SELECT account, role, joined_seq FROM conversation_member WHERE conversation_id = ? AND account = ?
                    """
            ),
            arguments: [group.rawValue, account.rawValue],
            groupMember
        )
    }

    static func groupMember(_ row: Row) -> GroupMember {
        GroupMember(
            account: AccountID(rawValue: row[0]),
            role: MemberRole(rawValue: row[1]) ?? .member,
            joinedSeq: Seq(row[2] as Int64)
        )
    }

    static func requireAccounts(_ db: Database, _ accounts: [AccountID]) throws {
        for account in accounts {
            let known = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM account WHERE id = ?)"),
                arguments: [account.rawValue]
            )
            guard known == true else { throw StorageError.accountNotFound(account) }
        }
    }

    /// Adds a member whose positions start at the entry that added it: nothing sent before counts for it.
    static func join(_ db: Database, _ account: AccountID, _ entry: WireMessage, role: MemberRole) throws {
        let group = entry.conversation.rawValue
        try db.cachedStatement(
            sql: "INSERT INTO conversation_member (conversation_id, account, role, joined_seq) VALUES (?, ?, ?, ?)"
        ).execute(arguments: [group, account.rawValue, role.rawValue, entry.seq.rawValue])
        try db.cachedStatement(
            sql: """
                INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, read_seq, read_time,
                    own_read_seq, own_read_time, read_at, delivered_at)
                VALUES (?1, ?2, ?3, ?4, ?3, ?4, ?3, ?4, ?4, ?4)
                """
        ).execute(arguments: [group, account.rawValue, entry.seq.rawValue, entry.time.rawValue])
        try db.cachedStatement(sql: "UPDATE conversation SET member_count = member_count + 1 WHERE id = ?")
            .execute(arguments: [group])
    }

    /// Removes a member: the messages it had not read drop it from their audience; what it read stays read (its
    /// position is kept, frozen, in `former_member`).
    static func leave(_ db: Database, _ account: AccountID, of group: ConversationID, at seq: Seq) throws {
        let conversation = group.rawValue
        guard let member = try memberRow(db, account, of: group) else { return }
        let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT read_seq, read_at FROM receipt WHERE conversation_id = ? AND account = ?"),
            arguments: [conversation, account.rawValue]
        )
        let readSeq: Int64 = row?[0] ?? member.joinedSeq.rawValue
        let readAt: Int64 = row?[1] ?? 0
        let acks = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT seq, time FROM read_ack WHERE conversation_id = ? AND account = ? AND shared ORDER BY seq"
            ),
            arguments: [conversation, account.rawValue]
        ).map { FormerMember.Ack(seq: Seq($0[0] as Int64), time: Timestamp(milliseconds: $0[1])) }
        try db.cachedStatement(
            sql: """
                UPDATE receipt_count SET audience = audience - 1
                WHERE conversation_id = ? AND seq > ? AND sender != ? AND seq NOT IN (SELECT value FROM json_each(?))
                """
        ).execute(arguments: [
            conversation, max(readSeq, member.joinedSeq.rawValue), account.rawValue,
            FormerMember.seqList(acks.map(\.seq)),
        ])
        try db.cachedStatement(
            sql: """
                INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
                """
        ).execute(arguments: [
            conversation, account.rawValue, member.joinedSeq.rawValue, seq.rawValue, readSeq, readAt,
            FormerMember.encode(acks),
        ])
        for table in ["read_ack", "receipt", "conversation_member"] {
            try db.cachedStatement(sql: "DELETE FROM \(table) WHERE conversation_id = ? AND account = ?")
                .execute(arguments: [conversation, account.rawValue])
        }
        try db.cachedStatement(sql: "UPDATE conversation SET member_count = member_count - 1 WHERE id = ?")
            .execute(arguments: [conversation])
    }

    static func setRole(_ db: Database, _ account: AccountID, of group: ConversationID, to role: MemberRole) throws {
        try db.cachedStatement(sql: "UPDATE conversation_member SET role = ? WHERE conversation_id = ? AND account = ?")
            .execute(arguments: [role.rawValue, group.rawValue, account.rawValue])
    }

    /// Former members whose membership covered `seq` (they may be readers of it).
    static func formerMembers(_ db: Database, of group: ConversationID, around seq: Seq) throws -> [FormerMember] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT account, read_seq, read_at, acks FROM former_member
                    WHERE conversation_id = ? AND joined_seq < ?2 AND left_seq > ?2 ORDER BY account
                    """
            ),
            arguments: [group.rawValue, seq.rawValue]
        ).map {
            FormerMember(
                account: AccountID(rawValue: $0[0]),
                readSeq: Seq($0[1] as Int64),
                readAt: Timestamp(milliseconds: $0[2]),
                acks: FormerMember.decode($0[3])
            )
        }
    }
}

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
        of mark: ReadMark,
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
                    FormerMember.seqList(newly.excluding),
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
            var entry: ReceiptListEntry?
            let row = try Row.fetchOne(
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
            )
            if let row {
                let readTime: Int64? = (row[0] as Int64) >= query.seq.rawValue ? row[1] : row[4]
                switch query.list {
                case .read:
                    entry = try readTime.map {
                        ReceiptListEntry(
                            account: account,
                            time: Timestamp(milliseconds: $0),
                            content: try content(db, query.group, query.seq, account)
                        )
                    }
                case .unread:
                    entry = readTime == nil ? ReceiptListEntry(account: account) : nil
                default:
                    entry =
                        (row[2] as Int64) >= query.seq.rawValue
                        ? ReceiptListEntry(account: account, time: Timestamp(milliseconds: row[3])) : nil
                }
            } else if let time = former.first(where: { $0.account == account })?.read(query.seq) {
                entry = ReceiptListEntry(
                    account: account,
                    time: time,
                    content: try content(db, query.group, query.seq, account)
                )
            }
            if let entry { entries.append((ReceiptCursor(segment: .filtered, seq: .zero, account: account), entry)) }
        }
        return entries
    }
}
