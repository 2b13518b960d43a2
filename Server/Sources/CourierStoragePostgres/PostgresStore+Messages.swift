// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore: MessageStore {
    public func append(_ draft: MessageDraft) async throws(StorageError) -> AppendOutcome {
        switch await appendDirectMessage(draft) {
        case .done(let result): return result
        case .notTaken: return try await retryingConflict { () throws(StorageError) in try await appendOnce(draft) }
        case .unreachable(let reason): throw .unreachable(reason)
        case .failed:
            // Its batch failed, most likely before writing anything. But a statement can commit and lose its answer
            // (the connection drops after the commit). This attempt's entry, found under its own id, is this
            // attempt's, not a duplicate: ids are drawn per attempt, so a retry's entry has another.
            let result = try await retryingConflict { () throws(StorageError) in try await appendOnce(draft) }
            guard result.isDuplicate, result.message.id == draft.id else { return result }
            return AppendOutcome(appended: result.message, membershipSeq: nil, announcement: draft.announcement)
        }
    }

    public func recall(_ entry: MessageDraft, rules: RecallPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.recall != nil else { return try await append(entry) }
        return try await retryingConflict { () throws(StorageError) in try await appendOnce(entry, recallRules: rules) }
    }

    public func edit(_ entry: MessageDraft, rules: EditPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.edit != nil else { return try await append(entry) }
        return try await retryingConflict { () throws(StorageError) in try await appendOnce(entry, editRules: rules) }
    }

    /// `attempt`, once more after a lost uniqueness race (``StorageError/conflict``): a concurrent retry of the same
    /// (sender, clientId), or creator of the same group, committed first, and the second attempt finds it.
    func retryingConflict<T>(_ attempt: () async throws(StorageError) -> T) async throws(StorageError) -> T {
        do { return try await attempt() } catch .conflict { return try await attempt() }
    }

    /// - Parameters:
    ///   - recallRules: For a recall notice, who recalls (``RecallPlan``).
    ///   - editRules: For an edit entry, who edits (``EditPlan``).
    func appendOnce(
        _ draft: MessageDraft,
        recallRules: RecallPlan.Rules? = nil,
        editRules: EditPlan.Rules? = nil
    ) async throws(StorageError) -> AppendOutcome {
        try await transaction { connection in
            let isGroup = draft.conversation.kind == .group
            if isGroup {
                guard try await lockGroup(draft.conversation, on: connection) else {
                    throw StorageError.conversationNotFound(draft.conversation)
                }
                if let original = try await original(of: draft, on: connection) { return original }
            } else if draft.recall == nil, draft.edit == nil, draft.replyTo == nil {
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
            // A group sender must still be a member when the append commits. A recall notice is authorized by its
            // plan, from the roles read here (the sender, an admin or owner, or the app's backend — which may recall
            // the message of an account that has left since), as on SQLite.
            if isGroup, draft.recall == nil, draft.edit == nil,
                try await memberRow(draft.sender, of: draft.conversation, on: connection) == nil
            {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            var recall: RecallPlan?
            if draft.recall != nil {
                let rules = recallRules ?? RecallPlan.Rules(byApp: false, window: nil, managerWindow: nil)
                recall = try await connection.run(RecallPlan.Facts(draft, rules: rules), logger: logger)
            }
            var edit: EditPlan?
            if draft.edit != nil {
                let rules = editRules ?? EditPlan.Rules(byApp: false, window: nil, managersEdit: false)
                edit = try await connection.run(EditPlan.Facts(draft, rules: rules), logger: logger)
            }
            let result = try await insertEntry(draft, on: connection)
            try await connection.run(recall?.statements(in: draft.conversation) ?? [], logger: logger)
            try await connection.run(edit?.statements(for: draft) ?? [], logger: logger)
            if isGroup, draft.needsReadReceipt {
                _ = try await connection.rows(ReceiptTally.insert(sent: result.message), logger: logger)
            }
            return result
        }
    }

    /// The entry stored earlier under the same `(sender, clientID)`, as a duplicate.
    func original(of draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendOutcome? {
        try await connection.rows(
            WireMessage.query("WHERE sender = \(draft.sender.rawValue) AND client_id = \(draft.clientID.rawValue)"),
            logger: logger
        ).first.map { AppendOutcome(duplicateOf: try WireMessage($0)) }
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
    func insertEntry(_ draft: MessageDraft, on connection: PostgresConnection) async throws -> AppendOutcome {
        guard let result = try await insertEntryUnlessStored(draft, on: connection) else {
            throw StorageError.conversationNotFound(draft.conversation)
        }
        return result
    }

    /// ``insertEntry(_:on:)``, or `nil` when the conversation does not exist or `draft`'s `(sender, clientId)` is
    /// stored already. Its update takes the conversation's row lock if the caller does not hold it. A retry that
    /// commits while this one waits for the lock is not seen (the check reads the statement's snapshot); its entry's
    /// unique `(sender, client_id)` then refuses this insert, and ``append(_:)`` runs again and finds it.
    func insertEntryUnlessStored(
        _ entry: MessageDraft,
        on connection: PostgresConnection
    ) async throws -> AppendOutcome? {
        // A reply quotes what its original is now: the caller holds the conversation's row lock (a reply never takes
        // the unlocked first attempt), which orders it with a recall of the original.
        var draft = entry
        if let replyTo = entry.replyTo {
            let row = try await connection.rows(ReplyQuote.query(replyTo, in: entry.conversation), logger: logger).first
            draft = entry.with(quote: try ReplyQuote.excerpt(row))
        }
        let bindings = try Self.entryBindings(draft)
        guard let row = try await connection.run(InsertEntry.self, bindings, logger: logger).first else { return nil }
        let (seq, time, membershipSeq) = try row.decode((Int64, Int64, Int64).self)
        let isGroup = draft.conversation.kind == .group
        let result = AppendOutcome(
            appended: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
            membershipSeq: isGroup ? Seq(membershipSeq) : nil,
            announcement: draft.announcement
        )
        try await announce(result.change, on: connection)
        return result
    }

    /// `$1`–`$17` of an entry's insert: its time, conversation, id, sender and client id, then the draft's
    /// ``MessageDraft/rowValues`` (`$6`–`$17`, the row's ``MessageDraft/rowColumns``).
    static func entryBindings(_ draft: MessageDraft) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(draft.time.rawValue)
        bindings.append(draft.conversation.rawValue)
        bindings.append(draft.id.rawValue)
        bindings.append(draft.sender.rawValue)
        bindings.append(draft.clientID.rawValue)
        for value in try draft.rowValues {
            switch value {
            case .text(let text): bindings.append(text)
            case .bool(let flag): bindings.append(flag)
            }
        }
        return bindings
    }

    /// The conversation's next seq and the entry at it, in one statement, unless the entry is stored already. `time`
    /// never goes back in a conversation's log.
    enum InsertEntry: HotStatement {
        static let sql = """
            WITH head AS (
                UPDATE conversation SET last_seq = last_seq + 1, last_time = GREATEST(last_time, $1),
                    stamp = GREATEST(change_stamp(), stamp)
                WHERE id = $2 AND NOT EXISTS (SELECT 1 FROM message WHERE sender = $4 AND client_id = $5)
                RETURNING last_seq, last_time, membership_seq
            ), entry AS (
                INSERT INTO message (conversation_id, seq, id, sender, client_id, time, \(MessageDraft.rowColumns), stamp)
                SELECT $2, head.last_seq, $3, $4, $5, head.last_time, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                    $16, $17, change_stamp()
                FROM head
                RETURNING seq, time
            )
            SELECT entry.seq, entry.time, head.membership_seq FROM entry, head
            """
    }

    /// Creates a direct conversation and its two members on first use (concurrent creators converge).
    func ensureConversation(_ conversation: ConversationID, on connection: PostgresConnection) async throws {
        let create = try CreateDirectConversation(conversation)
        let exists =
            try await connection.query("SELECT 1 FROM conversation WHERE id = \(conversation.rawValue)", logger: logger)
            .decode(Int.self).first { _ in true } != nil
        guard !exists else { return }
        try await connection.run(create, logger: logger)
    }
}
