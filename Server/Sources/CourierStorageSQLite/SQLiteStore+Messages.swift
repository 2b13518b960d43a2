// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import GRDB

extension SQLiteStore: AccountStore {
    public func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError) {
        try await write { db in
            try db.cachedStatement(
                sql: "INSERT INTO account (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"
            ).execute(arguments: [account.rawValue, time.rawValue]
            )
        }
    }

    public func accountExists(_ account: AccountID) async throws(StorageError) -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM account WHERE id = ?)"),
                arguments: [account.rawValue]
            )
                ?? false
        }
    }
}

extension SQLiteStore: MessageStore {
    public func append(_ draft: MessageDraft) async throws(StorageError) -> AppendResult {
        try await write { db in
            if let original = try Self.fetchMessage(
                db,
                where: "sender = ? AND client_id = ?",
                [draft.sender.rawValue, draft.clientID.rawValue]
            ) {
                return AppendResult(message: original, isDuplicate: true)
            }
            try Self.ensureConversation(db, draft.conversation)
            let head = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        UPDATE conversation SET last_seq = last_seq + 1, last_time = max(last_time, ?) WHERE id = ?
                        RETURNING last_seq, last_time
                        """
                ),
                arguments: [draft.time.rawValue, draft.conversation.rawValue]
            )!
            let seq: Int64 = head[0]
            let time: Int64 = head[1]
            try db.cachedStatement(
                sql: """
                    INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                draft.conversation.rawValue, seq, draft.id.rawValue, draft.sender.rawValue,
                draft.clientID.rawValue, time, draft.body,
            ]
            )
            return AppendResult(
                message: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
                isDuplicate: false
            )
        }
    }

    public func messages(
        in conversation: ConversationID,
        after seq: Seq,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    {
        try await read { db in
            try Self.fetchMessages(
                db,
                where: "conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                [conversation.rawValue, seq.rawValue, limit]
            )
        }
    }

    public func messages(
        in conversation: ConversationID,
        before seq: Seq?,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    {
        try await read { db in
            try Self.fetchMessages(
                db,
                where: "conversation_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
                [conversation.rawValue, seq?.rawValue ?? Int64.max, limit]
            ).reversed()
        }
    }

    public func message(_ id: MessageID) async throws(StorageError) -> WireMessage? {
        try await read { db in try Self.fetchMessage(db, where: "id = ?", [id.rawValue]) }
    }

    /// Creates a direct conversation and its two members on first use.
    static func ensureConversation(_ db: Database, _ conversation: ConversationID) throws {
        guard let (first, second) = conversation.directMembers else {
            throw StorageError.conversationNotFound(conversation)
        }
        let exists = try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?)"),
            arguments: [conversation.rawValue]
        )
        guard exists != true else { return }
        for account in [first, second] {
            let known = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM account WHERE id = ?)"),
                arguments: [account.rawValue]
            )
            guard known == true else { throw StorageError.accountNotFound(account) }
        }
        try db.cachedStatement(sql: "INSERT INTO conversation (id, kind) VALUES (?, 'direct')").execute(arguments: [
            conversation.rawValue
        ]
        )
        for account in [first, second] {
            try db.cachedStatement(sql: "INSERT INTO conversation_member (conversation_id, account) VALUES (?, ?)")
                .execute(arguments: [conversation.rawValue, account.rawValue]
                )
        }
    }

    static let messageColumns = "id, conversation_id, seq, client_id, sender, time, body"

    static func fetchMessages(
        _ db: Database,
        where clause: String,
        _ arguments: StatementArguments
    ) throws
        -> [WireMessage]
    {
        try Row.fetchAll(
            db.cachedStatement(sql: "SELECT \(messageColumns) FROM message WHERE \(clause)"),
            arguments: arguments
        )
        .map(wireMessage)
    }

    static func fetchMessage(
        _ db: Database,
        where clause: String,
        _ arguments: StatementArguments
    ) throws
        -> WireMessage?
    {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(messageColumns) FROM message WHERE \(clause)"),
            arguments: arguments
        )
        .map(wireMessage)
    }

    static func wireMessage(_ row: Row) -> WireMessage {
        WireMessage(
            id: MessageID(rawValue: row[0]),
            conversation: ConversationID(rawValue: row[1]),
            seq: Seq(row[2] as Int64),
            clientID: ClientMessageID(rawValue: row[3]),
            sender: AccountID(rawValue: row[4]),
            time: Timestamp(milliseconds: row[5]),
            body: row[6]
        )
    }
}
