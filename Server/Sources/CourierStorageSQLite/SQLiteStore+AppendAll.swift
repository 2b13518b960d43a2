// Courier — Apache-2.0
public import CourierStorage
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
    ) async throws(StorageError) -> [Result<AppendResult, StorageError>] {
        let outcomes = try await write(queued: whenQueued) { db in
            // Which of them were stored before, and which ids are taken, in two statements instead of two each; a draft
            // whose key comes twice is looked up again (the first may have just stored it).
            let (stored, taken) = try Self.storedKeys(db, of: drafts)
            var seen: Set<String> = []
            var ids: Set<MessageID> = []
            var existing: ConversationID?
            return try drafts.map { draft -> Result<AppendResult, StorageError> in
                do {
                    let key = Self.key(of: draft)
                    if stored.contains(key) || !seen.insert(key).inserted {
                        if let original = try Self.original(db, of: draft) { return .success(original) }
                    }
                    // Its id is another entry's: refused before anything is written.
                    guard !taken.contains(draft.id.rawValue), ids.insert(draft.id).inserted else {
                        return .failure(.messageIDInUse(draft.id))
                    }
                    if draft.recall != nil { return .success(try Self.recall(db, draft, rules: recallRules)) }
                    // The conversation the previous draft was appended to exists.
                    let result = try Self.appendNew(db, draft, conversationExists: existing == draft.conversation)
                    existing = draft.conversation
                    return .success(result)
                } catch StorageError.unavailable(let reason) {
                    // The database failed (a row it could not read): the whole operation fails, as the protocol says.
                    throw StorageError.unavailable(reason)
                } catch let error as StorageError {
                    return .failure(error)
                }
            }
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
}
