// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire
internal import PostgresNIO

/// Groups on PostgreSQL: the same tables and the same derived receipts as SQLite (docs/decisions/0008). Every change
/// to a group's membership or log takes the group's conversation row lock (`FOR UPDATE`) and a group read takes it
/// shared (`FOR SHARE`), so an audience is never counted while a join, a leave or an append is half done; locks are
/// always taken in the order conversation → receipt → receipt_count.
extension PostgresStore: GroupStore {
    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendOutcome {
        try await retryingConflict { () throws(StorageError) in try await createGroupOnce(entry, members: members) }
    }

    private func createGroupOnce(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendOutcome
    {
        try await transaction { connection in
            if let original = try await original(of: entry, on: connection) { return original }
            let exists =
                try await connection.query(
                    "SELECT 1 FROM conversation WHERE id = \(entry.conversation.rawValue)",
                    logger: logger
                ).decode(Int.self).first { _ in true } != nil
            guard !exists else { throw StorageError.groupRefused(.alreadyExists) }
            try await connection.query(
                "INSERT INTO conversation (id, kind, member_count) VALUES (\(entry.conversation.rawValue), 'group', 0)",
                logger: logger
            )
            return try await apply(GroupChangePlan(creating: entry, members: members), on: connection)
        }
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome {
        guard entry.group != nil else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            let exists = try await lockGroup(group, on: connection)
            // A retry of a change that was applied gets its ack, even once that change dismissed the group.
            if let original = try await original(of: entry, on: connection) { return original }
            guard exists else { throw StorageError.groupRefused(.groupNotFound) }
            let plan = try await connection.run(GroupChangePlan.Facts(entry), logger: logger)
            return try await apply(plan, on: connection)
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await withPooledConnection { connection in try await memberRow(account, of: group, on: connection) }
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome {
        guard let messageID = entry.receiptRequest else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            guard try await lockGroup(group, on: connection) else {
                throw StorageError.conversationNotFound(group)
            }
            if let original = try await original(of: entry, on: connection) { return original }
            guard
                let target = try await connection.rows(
                    WireMessage.query("WHERE id = \(messageID.rawValue) AND conversation_id = \(group.rawValue)"),
                    logger: logger
                ).first.map(WireMessage.init)
            else { throw StorageError.conversationNotFound(group) }
            guard target.needsReadReceipt != true else { throw StorageError.groupRefused(.alreadyRequested) }
            guard try await memberRow(entry.sender, of: group, on: connection) != nil else {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            // The audience as of now. Reads hold the group's row shared, so none is half counted while this holds it
            // exclusively.
            let counted = try await connection.run(ReceiptRequestProcedure(target), logger: logger)
            let result = try await insertEntry(entry, on: connection)
            try await connection.run(
                ReceiptRequestProcedure.writes(target, audience: counted.audience, readCount: counted.readCount),
                logger: logger
            )
            return result
        }
    }
}
