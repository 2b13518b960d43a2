// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
public import CourierWire
internal import GRDB

extension SQLiteStore: AccountStore, CredentialStore, ModerationStore, ViewStore, TypingStore, ProfileStore,
    ReactionStore, ImportStore, MediaStore
{}

extension SQLiteStore: MessageStore {
    public func append(_ draft: MessageDraft) async throws(StorageError) -> AppendOutcome {
        try await append(draft, whenQueued: nil)
    }

    /// Group commits run in queue order: an append queued after this one takes a later seq.
    public func append(
        _ draft: MessageDraft,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> AppendOutcome {
        try await write(queued: whenQueued) { db in try Self.append(db, draft) }
    }

    /// An append in the caller's transaction: the original when `(sender, clientID)` is stored, else a new entry.
    static func append(_ db: Database, _ draft: MessageDraft) throws -> AppendOutcome {
        if let original = try original(db, of: draft) { return original }
        return try appendNew(db, draft, conversationExists: false)
    }

    /// A new entry (its key is not stored). Whatever it refuses (a group that is not there, a sender who is not a
    /// member) it refuses before it writes.
    static func appendNew(_ db: Database, _ draft: MessageDraft, conversationExists: Bool) throws -> AppendOutcome {
        if !conversationExists { try ensureConversation(db, draft.conversation) }
        guard draft.conversation.kind == .group else { return try insert(db, draft) }
        // A group sender must still be a member when the append commits.
        guard try memberRow(db, draft.sender, of: draft.conversation) != nil else {
            throw StorageError.groupRefused(.actorNotAMember)
        }
        let result = try insert(db, draft)
        if draft.needsReadReceipt { _ = try db.rows(ReceiptTally.insert(sent: result.message)) }
        return result
    }

    public func recall(_ entry: MessageDraft, rules: RecallPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.recall != nil else { return try await append(entry) }
        let result = try await write { db -> AppendOutcome in
            if let original = try Self.original(db, of: entry) { return original }
            return try Self.recall(db, entry, rules: rules)
        }
        if !result.isDuplicate {
            await purgeAfterRecall([entry])
        } else if let walPurge, walPurge.isPending {
            _ = await walPurge.purge(within: .seconds(10))
        }
        return result
    }

    /// A recall in the caller's transaction, its key not stored; what it refuses it refuses before it writes.
    static func recall(_ db: Database, _ entry: MessageDraft, rules: RecallPlan.Rules) throws -> AppendOutcome {
        // A recall checked before a dismissal committed lands after none: the dismissal is the group's last entry.
        // (PostgreSQL refuses it the same way, when the group's row lock finds no group.)
        if entry.conversation.kind == .group, try !isGroup(db, entry.conversation) {
            throw StorageError.conversationNotFound(entry.conversation)
        }
        let plan = try db.run(RecallPlan.Facts(entry, rules: rules))
        try checkIDFree(db, entry)
        let result = try insert(db, entry)
        try db.run(plan.statements(in: entry.conversation))
        return result
    }

    public func edit(_ entry: MessageDraft, rules: EditPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.edit != nil else { return try await append(entry) }
        return try await write { db -> AppendOutcome in
            if let original = try Self.original(db, of: entry) { return original }
            // An edit checked before a dismissal committed lands after none, as a recall does.
            if entry.conversation.kind == .group, try !Self.isGroup(db, entry.conversation) {
                throw StorageError.conversationNotFound(entry.conversation)
            }
            let plan = try db.run(EditPlan.Facts(entry, rules: rules))
            try Self.checkIDFree(db, entry)
            let result = try Self.insert(db, entry)
            try db.run(plan.statements(for: entry))
            return result
        }
    }

    /// After recalls committed: old page images in the WAL would still hold the bodies, so the WAL is folded into the
    /// (zeroed) file and truncated; when a reader keeps that from happening for 10 s the purge stays owed and is
    /// retried (ADR 0007). Imported history owes it, for one purge at the end of the import (``purgeRecalledPages()``).
    func purgeAfterRecall(_ entries: [MessageDraft]) async {
        guard let walPurge else { return }
        if entries.allSatisfy({ $0.announcement == .nobody }) {
            walPurge.owe()
        } else {
            _ = await walPurge.purge(within: .seconds(10))
        }
    }

    public func purgeRecalledPages() async throws(StorageError) {
        guard let walPurge, walPurge.isPending else { return }
        guard await walPurge.purge(within: .seconds(30)) else {
            throw .failed("The WAL could not be truncated within 30 s (a reader holds an old snapshot).")
        }
    }

    /// The entry stored earlier under the same `(sender, clientID)`, as a duplicate.
    static func original(_ db: Database, of draft: MessageDraft) throws -> AppendOutcome? {
        try fetchMessage(db, where: "sender = ? AND client_id = ?", [draft.sender.rawValue, draft.clientID.rawValue])
            .map(AppendOutcome.init(duplicateOf:))
    }

    /// Appends an entry at the conversation's next seq; a reply takes its quote here (``ReplyQuote``).
    static func insert(_ db: Database, _ entry: MessageDraft) throws -> AppendOutcome {
        let draft =
            try entry.replyTo.map {
                try entry.with(quote: ReplyQuote.excerpt(db.rows(ReplyQuote.query($0, in: entry.conversation)).first))
            } ?? entry
        let (seq, time, membershipSeq) = try Row.first(
            db.cachedStatement(
                sql: """
                    UPDATE conversation SET last_seq = last_seq + 1, last_time = max(last_time, ?), stamp = change_stamp()
                    WHERE id = ?
                    RETURNING last_seq, last_time, membership_seq
                    """
            ),
            arguments: [draft.time.rawValue, draft.conversation.rawValue],
            { row -> (Int64, Int64, Int64) in (row[0], row[1], row[2]) }
        )!
        let values = try draft.rowValues
        try db.cachedStatement(sql: Self.insertEntry).execute(
            arguments: StatementArguments(
                [
                    draft.conversation.rawValue, seq, draft.id.rawValue, draft.sender.rawValue, draft.clientID.rawValue,
                    time,
                ] as [any DatabaseValueConvertible]
                    + values.map(\.databaseValue)
            )
        )
        let result = AppendOutcome(
            appended: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
            membershipSeq: draft.conversation.kind == .group ? Seq(membershipSeq) : nil,
            announcement: draft.announcement
        )
        // Announced to nobody (imported history): no change to tell, so the endpoint lookup is skipped.
        try announce(db, result.change)
        return result
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

    /// Creates a direct conversation and its two members on first use; a group must exist.
    static func ensureConversation(_ db: Database, _ conversation: ConversationID) throws {
        let exists = try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?)"),
            arguments: [conversation.rawValue]
        )
        guard exists != true else { return }
        try db.run(try CreateDirectConversation(conversation))
    }

    /// An entry's row (``MessageDraft/rowColumns``, after what the statement before assigned).
    static let insertEntry = """
        INSERT INTO message (conversation_id, seq, id, sender, client_id, time, \(MessageDraft.rowColumns), stamp)
        VALUES
            (?, ?, ?, ?, ?, ?, \(MessageDraft.rowColumnNames.map { _ in "?" }.joined(separator: ", ")), change_stamp())
        """

    static func fetchMessages(
        _ db: Database,
        where clause: String,
        _ arguments: StatementArguments
    ) throws
        -> [WireMessage]
    {
        // Each row mapped where it lies: `fetchAll` copied every row first (a sync page's rows, copied then decoded,
        // were a fifth of the server's CPU while a device caught up).
        try Row.all(
            db.cachedStatement(sql: "SELECT \(WireMessage.columns) FROM message WHERE \(clause)"),
            arguments: arguments
        ) { try WireMessage($0) }
    }

    static func fetchMessage(
        _ db: Database,
        where clause: String,
        _ arguments: StatementArguments
    ) throws
        -> WireMessage?
    {
        try Row.first(
            db.cachedStatement(sql: "SELECT \(WireMessage.columns) FROM message WHERE \(clause)"),
            arguments: arguments
        ) { try WireMessage($0) }
    }
}

/// GRDB's row read as the shared decoders read one (a sync page's rows are decoded where they lie).
extension Row: SQLRowReading {
    func int64(_ column: Int) throws(StorageError) -> Int64 { self[column] }
    func optionalInt64(_ column: Int) throws(StorageError) -> Int64? { self[column] }
    func string(_ column: Int) throws(StorageError) -> String { self[column] }
    func optionalString(_ column: Int) throws(StorageError) -> String? { self[column] }
    func bool(_ column: Int) throws(StorageError) -> Bool { self[column] }
}

extension SQLiteStore: StoreHealth, StoreObservation {
    /// Commits a real write on the writing connection, synced like any other: the probe row's counter moves. Another
    /// process holding the write lock for over half a second, a read-only file, a full disk or any other I/O error
    /// fails it. (Taking the lock alone is not enough: it succeeds on a full disk, where every write then fails. A
    /// probe answers quickly: load balancers give it a second or so; writes keep their 10 s busy timeout.)
    public func checkWritable() async throws(StorageError) {
        do {
            try await writer.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA busy_timeout = 500")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = \(Self.busyTimeoutMilliseconds)") }
                try db.inTransaction(.immediate) {
                    try db.execute(sql: "UPDATE health_probe SET probes = probes + 1")
                    return .commit
                }
            }
        } catch {
            throw .failed(String(describing: error))
        }
    }
}

extension MessageDraft.RowValue {
    /// The value as GRDB binds it.
    var databaseValue: DatabaseValue {
        switch self {
        case .text(let text): text.databaseValue
        case .bool(let flag): flag.databaseValue
        }
    }
}
