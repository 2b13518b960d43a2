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
            try db.cachedStatement(sql: "INSERT INTO conversation (id, kind, member_count) VALUES (?, 'group', 0)")
                .execute(arguments: [entry.conversation.rawValue])
            return try Self.apply(db, GroupChangePlan(creating: entry, members: members))
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
            return try Self.apply(db, GroupChangePlan(entry, actorRole: actorRole, roles: roles))
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await read { db in try Self.memberRow(db, account, of: group) }
    }

    public func owner(of group: ConversationID) async throws(StorageError) -> AccountID? {
        try await read { db in
            try String.fetchOne(
                db.cachedStatement(
                    sql: "SELECT account FROM conversation_member WHERE conversation_id = ? AND role = 'owner' LIMIT 1"
                ),
                arguments: [group.rawValue]
            ).map(AccountID.init(rawValue:))
        }
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
}

// MARK: Membership

extension SQLiteStore {
    /// Runs a group change's plan in the caller's transaction: its entry, then its writes.
    static func apply(_ db: Database, _ plan: GroupChangePlan) throws -> AppendResult {
        try requireAccounts(db, plan.accountsToCheck)
        let result = try insert(db, plan.entry)
        let (group, seq) = (result.message.conversation, result.message.seq)
        for write in plan.writes {
            switch write {
            case .join(let accounts, let role):
                for account in accounts { try join(db, account, result.message, role: role) }
            case .leave(let account):
                try leave(db, account, of: group, at: seq)
            case .setRole(let accounts, let role):
                for account in accounts { try setRole(db, account, of: group, to: role) }
            case .dismiss:
                try dismiss(db, group, at: seq)
            }
        }
        return result
    }

    /// Whether `group` is a group that was not dismissed.
    static func isGroup(_ db: Database, _ group: ConversationID) throws -> Bool {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT kind FROM conversation WHERE id = ? AND dismissed_seq IS NULL"),
            arguments: [group.rawValue]
        ) == ConversationKind.group.rawValue
    }

    /// Ends every membership of a group at once, the dismissal at `seq` being its last entry (``GroupStore``).
    static func dismiss(_ db: Database, _ group: ConversationID, at seq: Seq) throws {
        for table in ["read_ack", "receipt", "conversation_member", "former_member", "receipt_count"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE conversation_id = ?", arguments: [group.rawValue])
        }
        try db.execute(
            sql: "UPDATE conversation SET member_count = 0, dismissed_seq = ? WHERE id = ?",
            arguments: [seq.rawValue, group.rawValue]
        )
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
                    own_read_seq, own_read_time, read_at, delivered_at, stamp)
                VALUES (?1, ?2, ?3, ?4, ?3, ?4, ?3, ?4, ?4, ?4, change_stamp())
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
        let shared = try Row.first(
            db.cachedStatement(sql: "SELECT read_seq, read_at FROM receipt WHERE conversation_id = ? AND account = ?"),
            arguments: [conversation, account.rawValue]
        ) { (seq: Seq($0[0] as Int64), at: Timestamp(milliseconds: $0[1])) }
        let acks = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT seq, time FROM read_ack WHERE conversation_id = ? AND account = ? AND shared ORDER BY seq"
            ),
            arguments: [conversation, account.rawValue]
        ).map { FormerMember.Ack(seq: Seq($0[0] as Int64), time: Timestamp(milliseconds: $0[1])) }
        let plan = LeavePlan(member: member, shared: shared, acks: acks, at: seq)
        try db.cachedStatement(
            sql: """
                UPDATE receipt_count SET audience = audience - 1
                WHERE conversation_id = ? AND seq > ? AND sender != ? AND seq NOT IN (SELECT value FROM json_each(?))
                """
        ).execute(arguments: [conversation, plan.unreadAbove.rawValue, account.rawValue, SQLJSON.seqList(plan.acks.map(\.seq))])
        try db.cachedStatement(
            sql: """
                INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
                """
        ).execute(arguments: [
            conversation, account.rawValue, plan.joinedSeq.rawValue, plan.leftSeq.rawValue, plan.readSeq.rawValue,
            plan.readAt.rawValue, plan.encodedAcks,
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
        try db.rows(FormerMember.query(of: group, around: seq)).map(FormerMember.init)
    }
}
