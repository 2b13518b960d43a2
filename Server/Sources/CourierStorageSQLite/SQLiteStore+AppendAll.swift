// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import CourierWire
internal import GRDB

/// Many appends in one operation (an import, ADR 0031): the drafts stored before and the ids taken found in two
/// statements, each draft then appended or recalled as alone, none in a savepoint of its own.
extension SQLiteStore {
    /// One store operation (one savepoint of a group commit) for all of them. Not a savepoint each: a refusal comes
    /// before the append's first write (``append(_:_:)``), and a savepoint per draft journals every page it touches
    /// (14 writes per message in an import of 200,000).
    public func appendAll(
        _ drafts: [MessageDraft],
        recallRules: RecallPlan.Rules,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> [Result<AppendOutcome, StorageError>] {
        let outcomes = try await write(queued: whenQueued) { db in
            // Which of them were stored before, and which ids are taken, in two statements instead of two each; a draft
            // whose key comes twice is looked up again (the first may have just stored it).
            let (stored, taken) = try Self.storedKeys(db, of: drafts)
            var seen: Set<String> = []
            var ids: Set<MessageID> = []
            var existing: ConversationID?
            var outcomes: [Result<AppendOutcome, StorageError>] = []
            outcomes.reserveCapacity(drafts.count)
            // Consecutive plain messages of one conversation, written together (``appendRun(_:_:conversationExists:)``).
            var run: [MessageDraft] = []
            func flush() throws {
                guard let first = run.first else { return }
                defer { run.removeAll(keepingCapacity: true) }
                do {
                    let results = try Self.appendRun(db, run, conversationExists: existing == first.conversation)
                    outcomes += results
                    if results.contains(where: { if case .success = $0 { true } else { false } }) {
                        existing = first.conversation
                    }
                } catch StorageError.failed(let reason) {
                    throw StorageError.failed(reason)
                } catch let error as StorageError {
                    // Refused before anything of the run was written.
                    outcomes += run.map { _ in .failure(error) }
                }
            }
            for draft in drafts {
                do {
                    let key = Self.key(of: draft)
                    if stored.contains(key) || !seen.insert(key).inserted {
                        try flush()
                        if let original = try Self.original(db, of: draft) {
                            outcomes.append(.success(original))
                            continue
                        }
                    }
                    // Its id is another entry's: refused before anything is written.
                    guard !taken.contains(draft.id.rawValue), ids.insert(draft.id).inserted else {
                        try flush()
                        outcomes.append(.failure(.messageIDInUse(draft.id)))
                        continue
                    }
                    if Self.joinsRun(draft) {
                        if let first = run.first, first.conversation != draft.conversation || run.count == Self.runLength {
                            try flush()
                        }
                        run.append(draft)
                        continue
                    }
                    try flush()
                    if draft.recall != nil {
                        outcomes.append(.success(try Self.recall(db, draft, rules: recallRules)))
                        continue
                    }
                    // The conversation the previous draft was appended to exists.
                    let result = try Self.appendNew(db, draft, conversationExists: existing == draft.conversation)
                    existing = draft.conversation
                    outcomes.append(.success(result))
                } catch StorageError.failed(let reason) {
                    // The database failed (a row it could not read): the whole operation fails, as the protocol says.
                    throw StorageError.failed(reason)
                } catch let error as StorageError {
                    outcomes.append(.failure(error))
                }
            }
            try flush()
            return outcomes
        }
        let recalled = zip(drafts, outcomes).filter { draft, outcome in
            if case .success(let result) = outcome { draft.recall != nil && !result.isDuplicate } else { false }
        }.map(\.0)
        if !recalled.isEmpty { await purgeAfterRecall(recalled) }
        return outcomes
    }

    /// `(sender, clientID)` as one string (a space is in neither).
    static func key(of draft: MessageDraft) -> String { draft.sender.rawValue + " " + draft.clientID.rawValue }

    /// The keys (``key(of:)``) of `drafts` stored before, and the ids among theirs that entries have.
    static func storedKeys(_ db: Database, of drafts: [MessageDraft]) throws -> (keys: Set<String>, ids: Set<String>) {
        let keys = try String.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.sender || ' ' || m.client_id FROM json_each(?) AS j JOIN message AS m
                    ON m.sender = substr(j.value, 1, instr(j.value, ' ') - 1) AND m.client_id = substr(j.value, instr(j.value, ' ') + 1)
                    """
            ),
            arguments: [SQLJSON.stringList(drafts.map(key(of:)))]
        )
        let ids = try String.fetchAll(
            db.cachedStatement(sql: "SELECT id FROM message WHERE id IN (SELECT value FROM json_each(?))"),
            arguments: [SQLJSON.stringList(drafts.map(\.id.rawValue))]
        )
        return (Set(keys), Set(ids))
    }

    /// Refuses an imported entry whose id another entry has (a live entry's id is a new UUID): called before the
    /// operation's first write, or in an operation of its own, whose savepoint a throw rolls back.
    static func checkIDFree(_ db: Database, _ entry: MessageDraft) throws {
        guard entry.announcement == .nobody else { return }
        let taken = try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM message WHERE id = ?)"),
            arguments: [entry.id.rawValue]
        )
        if taken == true { throw StorageError.messageIDInUse(entry.id) }
    }

    /// Most messages in one run: 12 values each (``runRowValues``), 3,072 for a full run, within SQLite's bound on a
    /// statement's parameters (32,766 since SQLite 3.32; Debian 12 and Apple ship later ones).
    static let runLength = 256

    /// Which of ``MessageDraft/rowColumnNames`` a run's drafts can carry (``joinsRun(_:)``). The others are always
    /// `NULL` in a run, and written as such rather than bound: six more parameters a message cost imports 9 %.
    static let runCarries = MessageDraft.rowColumnNames.map {
        !["reply_to", "quote", "recall", "group_change", "edit", "edit_of"].contains($0)
    }

    /// The values bound for one message of a run: the six the run assigns or names, then what ``runCarries``.
    static let runRowValues = 6 + runCarries.filter { $0 }.count

    /// Whether `draft` can be written with the messages around it (``appendRun(_:_:conversationExists:)``): an imported
    /// chat message (announced to nobody: no event to record) that quotes nothing and, in a group, asks for no receipts.
    static func joinsRun(_ draft: MessageDraft) -> Bool {
        draft.announcement == .nobody && draft.recall == nil && draft.edit == nil && draft.replyTo == nil && draft.quote == nil
            && draft.group == nil && !(draft.needsReadReceipt && draft.conversation.kind == .group)
    }

    /// Appends consecutive messages of one conversation as ``appendNew(_:_:conversationExists:)`` does each (the same
    /// rows, the same seqs and times, the same refusals), with one read and one update of the conversation and a few
    /// multi-row inserts: an import's messages come a conversation at a time, and the statements per message were most of
    /// its cost.
    ///
    /// A `StorageError` it throws comes before anything of the run is written (its caller counts it as every draft's
    /// refusal); what fails after the first write fails the whole operation.
    static func appendRun(
        _ db: Database,
        _ drafts: [MessageDraft],
        conversationExists: Bool
    ) throws -> [Result<AppendOutcome, StorageError>] {
        let conversation = drafts[0].conversation
        do {
            if !conversationExists { try ensureConversation(db, conversation) }
        } catch let error as StorageError {
            return drafts.map { _ in .failure(error) }
        }
        let isGroup = conversation.kind == .group
        // A group sender must still be a member when the append commits: asked once per sender.
        var members: [AccountID: Bool] = [:]
        if isGroup {
            for sender in Set(drafts.map(\.sender)) { members[sender] = try memberRow(db, sender, of: conversation) != nil }
        }
        guard
            let (lastSeq, lastTime, membershipSeq) = try Row.first(
                db.cachedStatement(sql: "SELECT last_seq, last_time, membership_seq FROM conversation WHERE id = ?"),
                arguments: [conversation.rawValue],
                { row -> (Int64, Int64, Int64) in (row[0], row[1], row[2]) }
            )
        else { return drafts.map { _ in .failure(.conversationNotFound(conversation)) } }
        var seq = lastSeq
        var time = lastTime
        var outcomes: [Result<AppendOutcome, StorageError>] = []
        var values: [DatabaseValue] = []
        values.reserveCapacity(drafts.count * Self.runRowValues)
        for draft in drafts {
            guard !isGroup || members[draft.sender] == true else {
                outcomes.append(.failure(.groupRefused(.actorNotAMember)))
                continue
            }
            seq += 1
            time = max(time, draft.time.rawValue)
            // Database values, not existentials: the arguments of a run are most of what it allocates.
            values.append(conversation.rawValue.databaseValue)
            values.append(seq.databaseValue)
            for text in [draft.id.rawValue, draft.sender.rawValue, draft.clientID.rawValue] { values.append(text.databaseValue) }
            values.append(time.databaseValue)
            var column = 0
            try draft.forEachRowValue { value in
                if Self.runCarries[column] {
                    values.append(value.databaseValue)
                } else {
                    assert(value.databaseValue.isNull, "a run's draft carries \(MessageDraft.rowColumnNames[column])")
                }
                column += 1
            }
            outcomes.append(
                .success(
                    AppendOutcome(
                        appended: draft.message(at: Seq(seq), time: Timestamp(milliseconds: time)),
                        membershipSeq: isGroup ? Seq(membershipSeq) : nil,
                        announcement: draft.announcement
                    )
                )
            )
        }
        let rows = Int(seq - lastSeq)
        guard rows > 0 else { return outcomes }
        try db.cachedStatement(
            sql: "UPDATE conversation SET last_seq = ?, last_time = ?, stamp = change_stamp() WHERE id = ?"
        ).execute(arguments: [seq, time, conversation.rawValue])
        // The rows in statements of 256, 128, …, 1 (the bits of their number): at most nine statements cached, not one
        // per run length.
        let carried = Self.runCarries.map { $0 ? "?" : "NULL" }.joined(separator: ", ")
        let row = "(?, ?, ?, ?, ?, ?, \(carried), change_stamp())"
        var written = 0
        let width = Self.runRowValues
        for size in (0...8).map({ 1 << (8 - $0) }) where rows & size != 0 {
            try db.cachedStatement(
                sql: """
                    INSERT INTO message
                        (conversation_id, seq, id, sender, client_id, time, \(MessageDraft.rowColumns), stamp)
                    VALUES \(Array(repeating: row, count: size).joined(separator: ", "))
                    """
            ).execute(arguments: StatementArguments(values[written * width..<(written + size) * width]))
            written += size
        }
        return outcomes
    }
}
