// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore: AccountStore {
    public func setPushToken(_ token: PushToken?, of account: AccountID, device: DeviceID) async throws(StorageError) {
        try await transaction { connection in
            try await connection.query(
                """
                DELETE FROM push_token WHERE (account = \(account.rawValue) AND device = \(device.rawValue))
                    OR (platform = \(token?.platform.rawValue) AND token = \(token?.token))
                """,
                logger: logger
            )
            guard let token else { return }
            try await connection.query(
                """
                INSERT INTO push_token (account, device, platform, token, sandbox, updated_at)
                VALUES (\(account.rawValue), \(device.rawValue), \(token.platform.rawValue), \(token.token),
                        \(token.sandbox), \(token.updatedAt.rawValue))
                """,
                logger: logger
            )
        }
    }

    public func pushTokens(of account: AccountID) async throws(StorageError) -> [PushToken] {
        try await withPooledConnection { connection in
            var tokens: [PushToken] = []
            let rows = try await connection.query(
                """
                SELECT device, platform, token, sandbox, updated_at FROM push_token WHERE account = \(account.rawValue)
                ORDER BY device
                """,
                logger: logger
            )
            for try await (device, platform, token, sandbox, updatedAt) in rows.decode(
                (String, String, String, Bool, Int64).self
            ) {
                tokens.append(
                    PushToken(
                        device: DeviceID(rawValue: device),
                        platform: PushPlatform(rawValue: platform),
                        token: token,
                        sandbox: sandbox,
                        updatedAt: Timestamp(milliseconds: updatedAt)
                    )
                )
            }
            return tokens
        }
    }

    public func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                "INSERT INTO account (id, created_at) VALUES (\(account.rawValue), \(time.rawValue)) ON CONFLICT (id) DO NOTHING",
                logger: logger
            )
        }
    }

    public func registerAccounts(_ accounts: [AccountID], at time: Timestamp) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                """
                INSERT INTO account (id, created_at) SELECT unnest(\(accounts.map(\.rawValue))::text[]), \(time.rawValue)
                ON CONFLICT (id) DO NOTHING
                """,
                logger: logger
            )
        }
    }

    public func accountExists(_ account: AccountID) async throws(StorageError) -> Bool {
        try await withPooledConnection { connection in
            try await connection.query("SELECT 1 FROM account WHERE id = \(account.rawValue)", logger: logger)
                .decode(Int.self).first { _ in true } != nil
        }
    }
}

extension PostgresStore: MessageStore {
    public func append(_ draft: MessageDraft) async throws(StorageError) -> AppendResult {
        do {
            return try await appendOnce(draft)
        } catch .conflict {
            // A concurrent retry of the same (sender, clientId) committed first: this attempt now finds it.
            return try await appendOnce(draft)
        }
    }

    private func appendOnce(_ draft: MessageDraft) async throws(StorageError) -> AppendResult {
        try await transaction { connection in
            let isGroup = draft.conversation.kind == .group
            if isGroup {
                guard try await lockGroup(draft.conversation, on: connection) else {
                    throw StorageError.conversationNotFound(draft.conversation)
                }
            } else {
                try await ensureConversation(draft.conversation, on: connection)
                // The row lock serializes appends to this conversation until commit: seq is gapless and never reused.
                _ = try await connection.query(
                    "SELECT last_seq FROM conversation WHERE id = \(draft.conversation.rawValue) FOR UPDATE",
                    logger: logger
                ).decode(Int64.self).first { _ in true }
            }
            if let original = try await original(of: draft, on: connection) { return original }
            // A group sender must still be a member when the append commits. A recall notice is authorized by the
            // recall service (the sender, an admin or owner, or the app's backend — which may recall the message of
            // an account that has left since), as on SQLite.
            if isGroup, draft.recall == nil,
                try await memberRow(draft.sender, of: draft.conversation, on: connection) == nil
            {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            var recalledSeq: Int64?
            if let notice = draft.recall {
                let target = try await connection.query(
                    "SELECT recalled, seq FROM message WHERE id = \(notice.messageID.rawValue) FOR UPDATE",
                    logger: logger
                ).decode((Bool, Int64).self).first { _ in true }
                guard let target else { throw StorageError.conversationNotFound(draft.conversation) }
                guard !target.0 else { throw StorageError.alreadyRecalled }
                recalledSeq = target.1
            }
            let result = try await insertEntry(draft, on: connection)
            if let notice = draft.recall, notice.mode == .oneWay {
                // The sender's account keeps the message as sent (SPEC §6); everyone else gets the tombstone.
                try await connection.query(
                    """
                    INSERT INTO sender_copy (message_id, sender, body, quote)
                    SELECT id, sender, body, quote FROM message WHERE id = \(notice.messageID.rawValue)
                    """,
                    logger: logger
                )
            }
            if let notice = draft.recall {
                // The body goes; the tombstone (ids, sender, seq, time) stays so that every device learns of the
                // recall. PostgreSQL keeps the old row version until (auto)vacuum reclaims it.
                try await connection.query(
                    """
                    UPDATE message SET body = '', quote = NULL, recalled = TRUE, counts_unread = FALSE
                    WHERE id = \(notice.messageID.rawValue)
                    """,
                    logger: logger
                )
                try await connection.query(
                    "UPDATE message SET quote = NULL WHERE reply_to = \(notice.messageID.rawValue)",
                    logger: logger
                )
                // Its receipts go too (SPEC §6): the count, so that later reads neither raise it nor announce it,
                // and the notes left with acks. Readers' positions stay: they are positions in the log.
                if let seq = recalledSeq {
                    try await connection.query(
                        "DELETE FROM receipt_count WHERE conversation_id = \(draft.conversation.rawValue) AND seq = \(seq)",
                        logger: logger
                    )
                    try await connection.query(
                        "DELETE FROM ack_content WHERE conversation_id = \(draft.conversation.rawValue) AND seq = \(seq)",
                        logger: logger
                    )
                }
            }
            if isGroup, draft.needsReadReceipt {
                let members =
                    try await connection.query(
                        "SELECT member_count FROM conversation WHERE id = \(draft.conversation.rawValue)",
                        logger: logger
                    ).decode(Int64.self).first { _ in true } ?? 1
                try await insertTally(result.message, audience: Int(members) - 1, readCount: 0, on: connection)
            }
            return result
        }
    }

    /// The entry stored earlier under the same `(sender, clientID)`, as a duplicate.
    func original(of draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendResult? {
        try await fetchMessages(
            on: connection,
            "WHERE sender = \(draft.sender.rawValue) AND client_id = \(draft.clientID.rawValue)"
        ).first.map { AppendResult(message: $0, isDuplicate: true) }
    }

    /// Appends an entry at the conversation's next seq (the caller holds the conversation row lock) and tells the
    /// other nodes once it commits.
    func insertEntry(_ draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendResult {
        let head =
            try await connection.query(
                """
                UPDATE conversation SET last_seq = last_seq + 1, last_time = GREATEST(last_time, \(draft.time.rawValue)),
                    stamp = change_stamp()
                WHERE id = \(draft.conversation.rawValue) RETURNING last_seq, last_time
                """,
                logger: logger
            ).decode((Int64, Int64).self).first { _ in true }
        let (seq, time) = head ?? (0, 0)
        try await connection.query(
            """
            INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, reply_to, quote, recall,
                counts_unread, needs_receipt, group_change, receipt_request, type, stamp)
            VALUES (\(draft.conversation.rawValue), \(seq), \(draft.id.rawValue), \(draft.sender.rawValue),
                    \(draft.clientID.rawValue), \(time), \(draft.body), \(draft.replyTo?.rawValue), \(draft.quote),
                    \(try EntryJSON.encode(draft.recall)), \(draft.countsAsUnread), \(draft.needsReadReceipt),
                    \(try EntryJSON.encode(draft.group)), \(draft.receiptRequest?.rawValue), \(draft.type), change_stamp())
            """,
            logger: logger
        )
        try await notify(
            StoreChange(kind: .message, conversation: draft.conversation, seq: Seq(seq), origin: nodeID),
            on: connection
        )
        let result = AppendResult(
            message: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
            isDuplicate: false
        )
        try await record(WebhookEvents.entry(result), on: connection)
        return result
    }

    public func recall(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        try await append(entry)
    }

    public func senderCopies(
        of messages: [MessageID],
        sender: AccountID
    ) async throws(StorageError) -> [MessageID: SenderCopy] {
        guard !messages.isEmpty else { return [:] }
        return try await withPooledConnection { connection in
            var copies: [MessageID: SenderCopy] = [:]
            let rows = try await connection.query(
                """
                SELECT message_id, body, quote FROM sender_copy
                WHERE sender = \(sender.rawValue) AND message_id = ANY(\(messages.map(\.rawValue))::text[])
                """,
                logger: logger
            )
            for try await (id, body, quote) in rows.decode((String, String, String?).self) {
                copies[MessageID(rawValue: id)] = SenderCopy(body: body, quote: quote)
            }
            return copies
        }
    }

    public func messages(
        in conversation: ConversationID,
        after seq: Seq,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    {
        try await withPooledConnection { connection in
            try await fetchMessages(
                on: connection,
                "WHERE conversation_id = \(conversation.rawValue) AND seq > \(seq.rawValue) ORDER BY seq LIMIT \(limit)"
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
        try await withPooledConnection { connection in
            let before = seq?.rawValue ?? Int64.max
            return try await fetchMessages(
                on: connection,
                "WHERE conversation_id = \(conversation.rawValue) AND seq < \(before) ORDER BY seq DESC LIMIT \(limit)"
            ).reversed()
        }
    }

    public func message(_ id: MessageID) async throws(StorageError) -> WireMessage? {
        try await withPooledConnection { connection in
            try await fetchMessages(on: connection, "WHERE id = \(id.rawValue)").first
        }
    }

    /// Creates a direct conversation and its two members on first use (concurrent creators converge).
    func ensureConversation(_ conversation: ConversationID, on connection: PostgresConnection) async throws {
        guard let (first, second) = conversation.directMembers else {
            throw StorageError.conversationNotFound(conversation)
        }
        let exists =
            try await connection.query("SELECT 1 FROM conversation WHERE id = \(conversation.rawValue)", logger: logger)
            .decode(Int.self).first { _ in true } != nil
        guard !exists else { return }
        for account in [first, second] {
            let known =
                try await connection.query("SELECT 1 FROM account WHERE id = \(account.rawValue)", logger: logger)
                .decode(Int.self).first { _ in true } != nil
            guard known else { throw StorageError.accountNotFound(account) }
        }
        try await connection.query(
            "INSERT INTO conversation (id, kind) VALUES (\(conversation.rawValue), 'direct') ON CONFLICT (id) DO NOTHING",
            logger: logger
        )
        for account in [first, second] {
            try await connection.query(
                """
                INSERT INTO conversation_member (conversation_id, account) VALUES (\(conversation.rawValue), \(account.rawValue))
                ON CONFLICT DO NOTHING
                """,
                logger: logger
            )
        }
    }

    /// Messages matching `clause` (a `WHERE …` continuation with binds).
    func fetchMessages(on connection: PostgresConnection, _ clause: PostgresQuery) async throws -> [WireMessage] {
        var query: PostgresQuery = """
            SELECT id, conversation_id, seq, client_id, sender, time, body, reply_to, quote, recall, recalled,
                needs_receipt, group_change, receipt_request, type
            FROM message\u{20}
            """
        query.sql += clause.sql
        query.binds = clause.binds
        var messages: [WireMessage] = []
        let rows = try await connection.query(query, logger: logger)
        for try await row in rows.decode(
            (
                String, String, Int64, String, String, Int64, String, String?, String?, String?, Bool, Bool, String?,
                String?, String?
            ).self
        ) {
            let (id, conversation, seq, clientID, sender, time, body, replyTo, quote, recall, recalled) =
                (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10)
            messages.append(
                WireMessage(
                    id: MessageID(rawValue: id),
                    conversation: ConversationID(rawValue: conversation),
                    seq: Seq(seq),
                    clientID: ClientMessageID(rawValue: clientID),
                    sender: AccountID(rawValue: sender),
                    time: Timestamp(milliseconds: time),
                    type: row.14,
                    body: body,
                    replyTo: replyTo.map(MessageID.init(rawValue:)),
                    quote: quote,
                    recall: try EntryJSON.decode(recall),
                    recalled: recalled ? true : nil,
                    needsReadReceipt: row.11 ? true : nil,
                    group: try EntryJSON.decode(WireGroupChange.self, row.12),
                    receiptRequest: row.13.map(MessageID.init(rawValue:))
                )
            )
        }
        return messages
    }
}
