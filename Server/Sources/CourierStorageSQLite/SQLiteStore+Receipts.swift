// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import GRDB

extension SQLiteStore: ConversationStore {
    public func conversations(of account: AccountID) async throws(StorageError) -> [ConversationState] {
        try await read { db in
            let ids = try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT conversation_id FROM conversation_member WHERE account = ? ORDER BY conversation_id"
                ),
                arguments: [account.rawValue]
            )
            return try ids.compactMap {
                try Self.fetchConversation(db, ConversationID(rawValue: $0), viewer: account)
            }
        }
    }

    public func conversation(_ id: ConversationID) async throws(StorageError) -> ConversationState? {
        try await read { db in try Self.fetchConversation(db, id, viewer: nil) }
    }

    /// The conversation as `viewer` sees it (its own reading position, what others share), or as every member
    /// shares it when `viewer` is `nil`.
    static func fetchConversation(
        _ db: Database,
        _ id: ConversationID,
        viewer: AccountID?
    ) throws -> ConversationState? {
        guard
            let row = try Row.first(
                db.cachedStatement(
                    sql: "SELECT kind, last_seq, last_time, member_count FROM conversation WHERE id = ?"
                ),
                arguments: [id.rawValue],
                { row -> (kind: String, lastSeq: Int64, lastTime: Int64, memberCount: Int) in
                    (row[0], row[1], row[2], row[3])
                }
            )
        else { return nil }
        let kind = ConversationKind(rawValue: row.kind) ?? .direct
        if kind == .group {
            // A group may have 100,000 members: the caller gets its own position and the group's size.
            let member = try viewer.flatMap { try memberRow(db, $0, of: id) }
            return ConversationState(
                id: id,
                kind: .group,
                members: [],
                lastSeq: Seq(row.lastSeq),
                lastTime: Timestamp(milliseconds: row.lastTime),
                receipts: try viewer.map { [try memberReceipts(db, id, shared: false, $0)] } ?? [],
                group: member.map {
                    GroupState(memberCount: row.memberCount, role: $0.role, joinedSeq: $0.joinedSeq)
                }
            )
        }
        let members = try String.fetchAll(
            db.cachedStatement(
                sql: "SELECT account FROM conversation_member WHERE conversation_id = ? ORDER BY account"
            ),
            arguments: [id.rawValue]
        ).map(AccountID.init(rawValue:))
        let receipts = try String.fetchAll(
            db.cachedStatement(sql: "SELECT account FROM receipt WHERE conversation_id = ? ORDER BY account"),
            arguments: [id.rawValue]
        ).map { account in
            let account = AccountID(rawValue: account)
            return try Self.memberReceipts(db, id, shared: account != viewer, account)
        }
        return ConversationState(
            id: id,
            kind: kind,
            members: members,
            lastSeq: Seq(row.lastSeq),
            lastTime: Timestamp(milliseconds: row.lastTime),
            receipts: receipts
        )
    }
}

extension SQLiteStore: ReceiptStore {
    public func advanceDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    )
        async throws(StorageError) -> WatermarkChange
    {
        try await write { db in
            guard
                let lastSeq = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT last_seq FROM conversation WHERE id = ?"),
                    arguments: [conversation.rawValue]
                )
            else { throw StorageError.conversationNotFound(conversation) }
            if conversation.kind == .group, try Self.memberRow(db, account, of: conversation) == nil {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            guard seq.rawValue <= lastSeq else { throw StorageError.seqBeyondLastMessage(last: Seq(lastSeq)) }
            let time =
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT time FROM message WHERE conversation_id = ? AND seq = ?"),
                    arguments: [conversation.rawValue, seq.rawValue]
                ) ?? 0
            // The invariant lives in SQL: the watermark only moves forward.
            try db.cachedStatement(
                sql: """
                    INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, delivered_at, stamp)
                    VALUES (?, ?, ?, ?, ?, change_stamp())
                    ON CONFLICT (conversation_id, account) DO UPDATE
                    SET delivered_seq = excluded.delivered_seq, delivered_time = excluded.delivered_time,
                        delivered_at = excluded.delivered_at, stamp = excluded.stamp
                    WHERE receipt.delivered_seq < excluded.delivered_seq
                    """
            ).execute(arguments: [conversation.rawValue, account.rawValue, seq.rawValue, time, now.rawValue]
            )
            let advanced = db.changesCount > 0
            let watermark = try Row.first(
                db.cachedStatement(
                    sql: "SELECT delivered_seq, delivered_time FROM receipt WHERE conversation_id = ? AND account = ?"
                ),
                arguments: [conversation.rawValue, account.rawValue],
                { row in Watermark(seq: Seq(row[0] as Int64), time: Timestamp(milliseconds: row[1])) }
            )!
            let change = WatermarkChange(watermark: watermark, advanced: advanced && seq > .zero)
            try Self.record(db, WebhookEvents.delivered(account, in: conversation, change, at: now))
            return change
        }
    }
}

extension SQLiteStore: ChangeStore {
    public func changeCursor() async throws(StorageError) -> ChangeCursor {
        try await read { db in
            let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT store_id, value FROM change_clock"))!
            return ChangeCursor(storeID: row[0], stamp: (row[1] as Int64) + 1)
        }
    }

    public func changedConversations(
        of account: AccountID,
        since: Int64
    ) async throws(StorageError) -> [ChangedConversation] {
        try await read { db in
            // O(the account's conversations) in an index scan of integers; states and entries only for what changed.
            let ids = try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT m.conversation_id FROM conversation_member m
                        JOIN conversation c ON c.id = m.conversation_id
                        WHERE m.account = ?1 AND (c.stamp >= ?2
                            OR EXISTS (SELECT 1 FROM receipt r
                                WHERE r.conversation_id = m.conversation_id AND r.account = ?1 AND r.stamp >= ?2)
                            -- A direct chat's two rows; never a scan of a group's receipts.
                            OR (c.kind = 'direct' AND EXISTS (SELECT 1 FROM receipt r
                                WHERE r.conversation_id = m.conversation_id AND r.stamp >= ?2)))
                        ORDER BY m.conversation_id
                        """
                ),
                arguments: [account.rawValue, since]
            )
            return try ids.compactMap { id -> ChangedConversation? in
                let conversation = ConversationID(rawValue: id)
                guard let state = try Self.fetchConversation(db, conversation, viewer: account) else { return nil }
                let changedAfter =
                    try Int64.fetchOne(
                        db.cachedStatement(
                            sql: """
                                SELECT seq FROM message WHERE conversation_id = ? AND stamp < ? ORDER BY seq DESC LIMIT 1
                                """
                        ),
                        arguments: [id, since]
                    ) ?? 0
                return ChangedConversation(state: state, changedAfter: Seq(changedAfter))
            }
        }
    }
}
