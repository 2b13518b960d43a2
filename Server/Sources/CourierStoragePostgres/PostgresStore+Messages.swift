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
            if let appended = try await appendDirectMessage(draft) { return appended }
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
                if let original = try await original(of: draft, on: connection) { return original }
            } else if draft.recall == nil {
                // A direct message: the insert takes the conversation's row lock itself and skips a duplicate.
                if let result = try await insertEntryUnlessStored(draft, on: connection) { return result }
                if let original = try await original(of: draft, on: connection) { return original }
                // The first entry: create the conversation (waiting for a concurrent first entry's transaction),
                // then append, unless that transaction stored this very entry.
                try await ensureConversation(draft.conversation, on: connection)
                if let result = try await insertEntryUnlessStored(draft, on: connection) { return result }
                if let original = try await original(of: draft, on: connection) { return original }
                throw StorageError.conversationNotFound(draft.conversation)
            } else if try await lockDirect(draft, on: connection) {
                if let original = try await original(of: draft, on: connection) { return original }
            }
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

    /// A message in a direct chat that exists, in one statement that commits on its own (instead of four round
    /// trips): the entry, its notification and its webhook deliveries. Their payloads are written beforehand with
    /// seq 0, which the statement replaces with the seq it takes: in the hand-written JSON `,"seq":0,"time":` occurs
    /// only where the writer put it (a quote inside a string is always escaped), and that is checked. The entry keeps
    /// the draft's time, so the statement takes only an append whose time does not go back. `nil` for anything else —
    /// a first message, a stored duplicate, an earlier time, a recall — which takes ``appendOnce(_:)``.
    func appendDirectMessage(_ draft: MessageDraft) async throws(StorageError) -> AppendResult? {
        guard draft.conversation.kind == .direct, draft.recall == nil else { return nil }
        let provisional = AppendResult(message: draft.message(at: .zero), isDuplicate: false)
        let events = WebhookEvents.entry(provisional)
        let notification: String
        do {
            notification = try notificationPayload(
                StoreChange(kind: .message, conversation: draft.conversation, seq: .zero, origin: nodeID)
            )
        } catch {
            return nil
        }
        guard notification.occurrences(of: Self.seqInNotification) == 1,
            events.allSatisfy({ $0.payload.occurrences(of: Self.seqInEntry) == 1 })
        else { return nil }
        let row = try await autocommit { connection in
            var bindings = try Self.entryBindings(draft)
            try bindings.append(events.map(\.id))
            try bindings.append(events.map(\.type.rawValue))
            try bindings.append(events.map(\.conversation.rawValue))
            try bindings.append(events.map(\.time.rawValue))
            try bindings.append(events.map(\.payload))
            try bindings.append(Self.channel)
            try bindings.append(notification)
            return try await connection.run(AppendDirectMessage.self, bindings, logger: logger).first
                .map { try $0.decode((Int64, Int64).self).0 }
        }
        guard let seq = row else { return nil }
        return AppendResult(message: draft.message(at: Seq(seq)), isDuplicate: false)
    }

    static let seqInEntry = #","seq":0,"time":"#
    static let seqInNotification = #""seq":0"#

    enum AppendDirectMessage: HotStatement {
        static let sql = """
            WITH head AS (
                UPDATE conversation SET last_seq = last_seq + 1, last_time = $1, stamp = change_stamp()
                WHERE id = $2 AND last_time <= $1
                    AND NOT EXISTS (SELECT 1 FROM message WHERE sender = $4 AND client_id = $5)
                RETURNING last_seq
            ), entry AS (
                INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, reply_to, quote, recall,
                    counts_unread, needs_receipt, group_change, receipt_request, type, stamp)
                SELECT $2, head.last_seq, $3, $4, $5, $1, $6, $7, $8, $9, $10, $11, $12, $13, $14, change_stamp()
                FROM head
                RETURNING seq
            ), recorded AS (
                INSERT INTO webhook_delivery (endpoint_id, event_id, type, conversation_id, created_at, payload,
                    next_attempt_at)
                SELECT e.id, v.event_id, v.type, v.conversation_id, v.created_at,
                    replace(v.payload, '\(seqInEntry)', ',"seq":' || entry.seq || ',"time":'), v.created_at
                FROM entry
                CROSS JOIN unnest($15::text[], $16::text[], $17::text[], $18::int8[], $19::text[])
                    WITH ORDINALITY AS v(event_id, type, conversation_id, created_at, payload, n)
                JOIN webhook_endpoint e ON \(endpointWants("v.type"))
                ORDER BY v.n, e.id
                FOR KEY SHARE OF e
            ), told AS (
                SELECT pg_notify($20, replace($21, '\(seqInNotification)', '"seq":' || entry.seq)) FROM entry
            )
            SELECT entry.seq, (SELECT count(*) FROM told) FROM entry
            """
    }

    /// Locks a direct conversation's row, creating the conversation first if it has no entry yet, and says whether
    /// `draft`'s `(sender, clientId)` is already stored — one statement. The row lock serializes appends to this
    /// conversation until commit: seq is gapless and never reused. A retry that commits while this one waits for the
    /// lock is not seen here (the check reads the statement's snapshot); its entry's unique `(sender, client_id)`
    /// then refuses this insert, and ``append(_:)`` runs again and finds it.
    func lockDirect(_ draft: MessageDraft, on connection: PostgresConnection) async throws -> Bool {
        let bindings = try PostgresBindings.of(draft.sender.rawValue, draft.clientID.rawValue, draft.conversation.rawValue)
        if let row = try await connection.run(LockDirect.self, bindings, logger: logger).first {
            return try row.decode((Int64, Bool).self).1
        }
        try await ensureConversation(draft.conversation, on: connection)
        guard let row = try await connection.run(LockDirect.self, bindings, logger: logger).first else {
            throw StorageError.conversationNotFound(draft.conversation)
        }
        return try row.decode((Int64, Bool).self).1
    }

    enum LockDirect: HotStatement {
        static let sql = """
            SELECT last_seq, EXISTS (SELECT 1 FROM message WHERE sender = $1 AND client_id = $2)
            FROM conversation WHERE id = $3 FOR UPDATE
            """
    }

    /// Appends an entry at the conversation's next seq (the caller holds the conversation row lock) and tells the
    /// other nodes and the webhook endpoints once it commits: two statements.
    func insertEntry(_ draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendResult {
        guard let result = try await insertEntryUnlessStored(draft, on: connection) else {
            throw StorageError.conversationNotFound(draft.conversation)
        }
        return result
    }

    /// ``insertEntry(_:on:)``, or `nil` when the conversation does not exist or `draft`'s `(sender, clientId)` is
    /// stored already. Its update takes the conversation's row lock if the caller does not hold it. A retry that
    /// commits while this one waits for the lock is not seen (the check reads the statement's snapshot); its entry's
    /// unique `(sender, client_id)` then refuses this insert, and ``append(_:)`` runs again and finds it.
    func insertEntryUnlessStored(_ draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendResult? {
        let bindings = try Self.entryBindings(draft)
        guard let row = try await connection.run(InsertEntry.self, bindings, logger: logger).first else { return nil }
        let (seq, time) = try row.decode((Int64, Int64).self)
        let result = AppendResult(
            message: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
            isDuplicate: false
        )
        try await publish(
            [StoreChange(kind: .message, conversation: draft.conversation, seq: Seq(seq), origin: nodeID)],
            events: WebhookEvents.entry(result),
            on: connection
        )
        return result
    }

    /// `$1`–`$14` of an entry's insert: its time, conversation, id, sender, client id, body, reply, quote, recall,
    /// whether it counts as unread and needs receipts, group change, receipt request and type.
    static func entryBindings(_ draft: MessageDraft) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        try bindings.append(draft.time.rawValue)
        try bindings.append(draft.conversation.rawValue)
        try bindings.append(draft.id.rawValue)
        try bindings.append(draft.sender.rawValue)
        try bindings.append(draft.clientID.rawValue)
        try bindings.append(draft.body)
        try bindings.append(draft.replyTo?.rawValue)
        try bindings.append(draft.quote)
        try bindings.append(try EntryJSON.encode(draft.recall))
        try bindings.append(draft.countsAsUnread)
        try bindings.append(draft.needsReadReceipt)
        try bindings.append(try EntryJSON.encode(draft.group))
        try bindings.append(draft.receiptRequest?.rawValue)
        try bindings.append(draft.type)
        return bindings
    }

    /// The conversation's next seq and the entry at it, in one statement, unless the entry is stored already. `time`
    /// never goes back in a conversation's log.
    enum InsertEntry: HotStatement {
        static let sql = """
            WITH head AS (
                UPDATE conversation SET last_seq = last_seq + 1, last_time = GREATEST(last_time, $1),
                    stamp = change_stamp()
                WHERE id = $2 AND NOT EXISTS (SELECT 1 FROM message WHERE sender = $4 AND client_id = $5)
                RETURNING last_seq, last_time
            )
            INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, reply_to, quote, recall,
                counts_unread, needs_receipt, group_change, receipt_request, type, stamp)
            SELECT $2, head.last_seq, $3, $4, $5, head.last_time, $6, $7, $8, $9, $10, $11, $12, $13, $14, change_stamp()
            FROM head
            RETURNING seq, time
            """
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

extension String {
    /// How many times `part` occurs, not overlapping (compared as UTF-8).
    func occurrences(of part: String) -> Int {
        let (text, part) = (Array(utf8), Array(part.utf8))
        guard !part.isEmpty, text.count >= part.count else { return 0 }
        var (count, index) = (0, 0)
        while index <= text.count - part.count {
            if text[index] == part[0], text[index..<index + part.count].elementsEqual(part) {
                count += 1
                index += part.count
            } else {
                index += 1
            }
        }
        return count
    }
}
