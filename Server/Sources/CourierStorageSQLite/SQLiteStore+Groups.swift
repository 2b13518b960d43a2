// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire
internal import GRDB

extension SQLiteStore: GroupStore {
    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendOutcome {
        try await write { db in
            if let original = try Self.original(db, of: entry) { return original }
            let exists = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?)"),
                arguments: [entry.conversation.rawValue]
            )
            guard exists != true else { throw StorageError.groupRefused(.alreadyExists) }
            try Self.checkIDFree(db, entry)
            try db.cachedStatement(sql: "INSERT INTO conversation (id, kind, member_count) VALUES (?, 'group', 0)")
                .execute(arguments: [entry.conversation.rawValue])
            return try Self.apply(db, GroupChangePlan(creating: entry, members: members))
        }
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome {
        guard entry.group != nil else { return try await append(entry) }
        return try await write { db in
            if let original = try Self.original(db, of: entry) { return original }
            let group = entry.conversation
            guard try Self.isGroup(db, group) else { throw StorageError.groupRefused(.groupNotFound) }
            try Self.checkIDFree(db, entry)
            return try Self.apply(db, try db.run(GroupChangePlan.Facts(entry)))
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await read { db in try Self.memberRow(db, account, of: group) }
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome {
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
            let counted = try db.run(ReceiptRequestProcedure(target))
            let result = try Self.insert(db, entry)
            try db.run(ReceiptRequestProcedure.writes(target, audience: counted.audience, readCount: counted.readCount))
            return result
        }
    }
}

// MARK: Membership

extension SQLiteStore {
    /// Runs a group change's plan in the caller's transaction: its entry, then its writes.
    static func apply(_ db: Database, _ plan: GroupChangePlan) throws -> AppendOutcome {
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

    /// On the hot path (every group send, delivery and read): a cached statement, read in place.
    static func memberRow(_ db: Database, _ account: AccountID, of group: ConversationID) throws -> GroupMember? {
        try Row.first(
            db.cachedStatement(
                sql: "SELECT role, joined_seq FROM conversation_member WHERE conversation_id = ? AND account = ?"
            ),
            arguments: [group.rawValue, account.rawValue]
        ) { row in
            GroupMember(account: account, role: MemberRole(rawValue: row[0]) ?? .member, joinedSeq: Seq(row[1] as Int64))
        }
    }

}
