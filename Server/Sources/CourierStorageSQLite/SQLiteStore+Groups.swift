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
        try db.run(AccountCheck(plan.accountsToCheck))
        let result = try insert(db, plan.entry)
        try db.run(GroupChangeProcedure(plan, entry: result.message))
        return result
    }

    /// Whether `group` is a group that was not dismissed.
    static func isGroup(_ db: Database, _ group: ConversationID) throws -> Bool {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT kind FROM conversation WHERE id = ? AND dismissed_seq IS NULL"),
            arguments: [group.rawValue]
        ) == ConversationKind.group.rawValue
    }

    static func memberRow(_ db: Database, _ account: AccountID, of group: ConversationID) throws -> GroupMember? {
        try db.rows(GroupMember.query(account, of: group)).first.map(GroupMember.init)
    }

    /// Former members whose membership covered `seq` (they may be readers of it).
    static func formerMembers(_ db: Database, of group: ConversationID, around seq: Seq) throws -> [FormerMember] {
        try db.rows(FormerMember.query(of: group, around: seq)).map(FormerMember.init)
    }
}
