// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Synchronization
internal import CourierServerCore

/// The writes of an import: accounts met, runs of messages and recalls, reads, membership changes, and how each
/// outcome is counted.
extension HistoryImport {
    /// Registers the accounts `records` name that this import has not met yet: an `account` record's at its
    /// `createdAt`, the others at the earliest time of the batch.
    func register(_ records: [HistoryRecord]) async throws {
        var created: [Timestamp: [AccountID]] = [:]
        var met: [AccountID] = []
        let earliest = records.compactMap(\.time).min() ?? Timestamp(milliseconds: 0)
        state.withLock { state in
            for record in records {
                if case .account(let account, let createdAt?, _) = record, !state.known.contains(account) {
                    created[createdAt, default: []].append(account)
                    state.known.insert(account)
                }
            }
            for record in records {
                for account in record.accounts where state.known.insert(account).inserted { met.append(account) }
            }
        }
        if !met.isEmpty { created[earliest, default: []].append(contentsOf: met) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (time, accounts) in created {
                group.addTask { try await self.store.registerAccounts(accounts, at: time) }
            }
            try await group.waitForAll()
        }
        let count = created.values.reduce(0) { $0 + $1.count }
        state.withLock { $0.summary.accounts += count }
    }

    /// Appends a run of messages and recalls in order, ``appendChunk`` per store operation, one operation at a time (a
    /// failed one has no later one committed behind it). A recall of a message the import can name (``named(_:in:)``)
    /// goes with them; one of another message is looked up first, once what came before it is stored.
    func entries(_ run: ArraySlice<(line: Int, record: HistoryRecord)>) async throws {
        var chunk: [(line: Int, draft: MessageDraft)] = []
        for (line, record) in run {
            switch record {
            case .message(let draft):
                chunk.append((line, draft))
            case .recall(let id, let message, let by, let time):
                var target = named(message, in: chunk)
                if case .unsettled = target {
                    // Which of the entries with that id the store keeps is known once they are written.
                    try await appendAll(chunk)
                    chunk = []
                    target = named(message, in: chunk)
                }
                if case .message(let conversation, let sender) = target {
                    let recalled = (id: message, conversation: conversation, sender: sender)
                    chunk.append((line, Self.recallEntry(id, of: recalled, by: by, at: time)))
                } else {
                    try await appendAll(chunk)
                    chunk = []
                    try await recall(line, id, message, by, time)
                }
            default:
                continue
            }
            if chunk.count == Self.appendChunk {
                try await appendAll(chunk)
                chunk = []
            }
        }
        try await appendAll(chunk)
    }

    /// How many of the messages it wrote an import remembers, for the recalls that follow them.
    static let rememberedMessages = 200_000

    /// Whose message a recall names, as far as the import can tell before the recall's transaction reads it.
    enum RecallTarget {
        /// The message stored under the id, as the store answered for an earlier operation; or the one entry of the
        /// chunk with that id, to be stored by the operation before the recall. Either way the recall's transaction
        /// reads the row again, and refuses a recall whose conversation or sender is not the row's
        /// (``RecallPlan/Facts``): the chunk's entry may be refused, its id another's.
        case message(ConversationID, AccountID)
        /// Several entries of the chunk have the id: which of them, if any, the store keeps is known once they are
        /// written.
        case unsettled
        /// Neither: the message is looked up once what came before the recall is stored.
        case unknown
    }

    /// Whose message `id` is, for a recall of it that follows `chunk` (``RecallTarget``). What the store answered
    /// comes first: a later entry with the same id is that entry again or is refused, and a recall must never name a
    /// line that was.
    func named(_ id: MessageID, in chunk: [(line: Int, draft: MessageDraft)]) -> RecallTarget {
        if let (conversation, sender) = state.withLock({ $0.appended[id] }) { return .message(conversation, sender) }
        var found: MessageDraft?
        for (_, draft) in chunk where draft.id == id {
            guard found == nil else { return .unsettled }
            found = draft
        }
        // A recall notice's id names no message.
        guard let draft = found, draft.recall == nil else { return .unknown }
        return .message(draft.conversation, draft.sender)
    }

    func appendAll(_ chunk: [(line: Int, draft: MessageDraft)]) async throws {
        guard !chunk.isEmpty else { return }
        let outcomes = try await store.appendAll(chunk.map(\.draft), recallRules: Self.recallRules, whenQueued: nil)
        let misnamed = state.withLock { state -> [(line: Int, draft: MessageDraft)] in
            var misnamed: [(line: Int, draft: MessageDraft)] = []
            for ((line, draft), outcome) in zip(chunk, outcomes) {
                if draft.recall == nil, case .success(let result) = outcome {
                    // Remembered for the recalls that follow (one lock for the chunk, not one per message): what is
                    // stored under the id, which for a duplicate is the entry stored before.
                    if state.appended.count >= Self.rememberedMessages { state.appended.removeAll(keepingCapacity: true) }
                    state.appended[result.message.id] = (result.message.conversation, result.message.sender)
                }
                if draft.recall != nil, case .failure(.conversationNotFound) = outcome {
                    // The transaction found no message under the id from that sender in that conversation: the entry
                    // the recall was named from was refused. Looked up below, and judged against what is stored.
                    misnamed.append((line, draft))
                } else {
                    state.summary.count(outcome, line: line, as: draft.recall == nil ? \.messages : \.recalls)
                }
            }
            return misnamed
        }
        // After the operation, so such a notice follows the operation's entries: the message, when there is one, was
        // stored before it, from another line than the one the recall was named from.
        for (line, draft) in misnamed {
            guard let notice = draft.recall else { continue }
            try await recall(line, draft.id, notice.messageID, draft.sender, draft.time)
        }
    }

    func read(
        _ line: Int,
        _ reader: AccountID,
        _ conversation: ConversationID,
        _ upTo: MessageID,
        _ time: Timestamp,
        _ shared: Bool
    ) async throws {
        guard let message = try await target(line, upTo, in: conversation) else { return }
        var read = ResolvedRead(reader: reader, conversation: conversation, target: .upTo(message.seq), isShared: shared, time: time)
        read.isAnnounced = false
        do {
            _ = try await store.markRead(read)
            state.withLock { $0.summary.reads += 1 }
        } catch where error.isDatabaseFailure {
            throw error
        } catch {
            state.withLock { $0.summary.skip(line, error) }
        }
    }

    func recall(_ line: Int, _ id: MessageID, _ messageID: MessageID, _ by: AccountID, _ time: Timestamp) async throws {
        guard let message = try await target(line, messageID, in: nil) else { return }
        guard message.recall == nil, message.group == nil, message.receiptRequest == nil else {
            state.withLock { $0.summary.skip(line, RequestError(.messageNotFound, "'\(messageID)' is not a message.")) }
            return
        }
        let entry = Self.recallEntry(id, of: (message.id, message.conversation, message.sender), by: by, at: time)
        try await outcome(line, as: \.recalls) { () throws(StorageError) in
            try await store.recall(entry, rules: Self.recallRules)
        }
    }

    /// An imported recall: no window (the vendor allowed it then); the roles are checked in its transaction.
    static let recallRules = RecallPlan.Rules(byApp: false, window: nil, managerWindow: nil)

    /// The entry of `by`'s two-way recall of `target` at `time`, with the id `id`, announced to nobody. Its client id is
    /// the one a live recall takes: an import's recall and a live one of the same message are one recall.
    static func recallEntry(
        _ id: MessageID,
        of target: (id: MessageID, conversation: ConversationID, sender: AccountID),
        by: AccountID,
        at time: Timestamp
    ) -> MessageDraft {
        let notice = WireRecallNotice(messageID: target.id, sender: target.sender, recalledBy: by, mode: .twoWay, countsAsUnread: false)
        var entry = MessageDraft(
            id: id,
            conversation: target.conversation,
            clientID: ClientMessageID(rawValue: "recall:\(target.id.rawValue)"),
            sender: by,
            time: time,
            body: "",
            recall: notice
        )
        entry.announcement = .nobody
        return entry
    }

    /// The message `id` (in `conversation`, when named), or `nil` with the line skipped.
    func target(_ line: Int, _ id: MessageID, in conversation: ConversationID?) async throws -> WireMessage? {
        let message = try await store.message(id)
        guard let message, conversation == nil || message.conversation == conversation else {
            let error = RequestError(.messageNotFound, "No message '\(id)'\(conversation.map { " in \($0)" } ?? "").")
            state.withLock { $0.summary.skip(line, error) }
            return nil
        }
        return message
    }

    /// Runs a write of one line and counts its outcome under `counter` (``Summary/count(_:line:as:)``). A database
    /// failure ends the import.
    func outcome(
        _ line: Int,
        as counter: WritableKeyPath<Summary, Int>,
        _ write: () async throws(StorageError) -> AppendOutcome
    ) async throws {
        let outcome: Result<AppendOutcome, StorageError>
        do {
            outcome = .success(try await write())
        } catch where error.isDatabaseFailure {
            throw error
        } catch {
            outcome = .failure(error)
        }
        state.withLock { $0.summary.count(outcome, line: line, as: counter) }
    }
}
