// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Reactions (ADR 0055), written once for every backend that runs ``SQLQuery``s.
extension ReactionStore where Self: SQLRunner {
    public func react(_ write: ReactionWrite) async throws(StorageError) -> ReactionOutcome {
        try await self.write(ReactProcedure(write: write) { content throws(StorageError) in try notification(content) })
    }

    public func reactions(of messages: [MessageID], in conversation: ConversationID, viewer: AccountID)
        async throws(StorageError) -> [WireReactions]
    {
        guard !messages.isEmpty else { return [] }
        return try await read(ReactionsProcedure(messages: messages, conversation: conversation, viewer: viewer))
    }

    public func reactionList(of message: MessageID, reaction: String?, after position: ReactionPosition?, limit: Int)
        async throws(StorageError) -> [ReactionListEntry]
    {
        let filter: SQLQuery = reaction.map { "AND reaction = \($0)" } ?? ""
        return try await readRows(
            """
            SELECT account, reaction, time FROM reaction
            WHERE message_id = \(message.rawValue) \(filter)
              AND (reaction, account) > (\(position?.reaction ?? ""), \(position?.account.rawValue ?? ""))
            ORDER BY reaction, account LIMIT \(limit)
            """
        ).map { row throws(StorageError) in
            ReactionListEntry(
                account: AccountID(rawValue: try row.string(0)),
                reaction: try row.string(1),
                time: Timestamp(milliseconds: try row.int64(2))
            )
        }
    }
}

/// One reaction added or removed, decided from what its transaction reads: the message's row, locked (so that a
/// message's reaction writes follow one another and its counts and versions are exact), not recalled, a chat message;
/// the account a member; the limits. Then the row, the count, the message's version, and when anything changed the
/// webhook event and the notice to the other nodes.
struct ReactProcedure: SQLProcedure {
    private enum State {
        case start
        /// The message's facts are read: its membership version (`nil`: a direct conversation).
        case message(membership: Seq?)
        case limits(membership: Seq?)
        case written(membership: Seq?, changed: Bool, writes: [SQLQuery])
        case version(membership: Seq?, changed: Bool)
        case counts(membership: Seq?, changed: Bool, version: Int64)
        case mine(membership: Seq?, changed: Bool, version: Int64, counts: [ReactionCount])
        case recording(ReactionOutcome, pending: [SQLQuery])
    }

    let write: ReactionWrite
    let notify: @Sendable (ChangeNotice.Content) throws(StorageError) -> SQLQuery?
    private var state = State.start

    init(write: ReactionWrite, notify: @escaping @Sendable (ChangeNotice.Content) throws(StorageError) -> SQLQuery?) {
        self.write = write
        self.notify = notify
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<ReactionOutcome> {
        let (message, account, reaction) = (write.message.rawValue, write.account.rawValue, write.reaction)
        switch state {
        case .start:
            state = .message(membership: nil)
            return .run(
                """
                SELECT m.recalled,
                    EXISTS (SELECT 1 FROM conversation_member
                        WHERE conversation_id = m.conversation_id AND account = \(account)),
                    (SELECT membership_seq FROM conversation WHERE id = m.conversation_id)
                FROM message m
                WHERE m.id = \(message) AND m.conversation_id = \(write.conversation.rawValue)
                  AND m.recall IS NULL AND m.edit IS NULL AND m.group_change IS NULL AND m.receipt_request IS NULL
                \(lockRows: ())
                """
            )
        case .message:
            guard let row = rows?.first else { throw .conversationNotFound(write.conversation) }
            guard try !row.bool(0) else { throw .reactionRefused(.messageRecalled) }
            guard try row.bool(1) else { throw .groupRefused(.actorNotAMember) }
            let membership = write.conversation.kind == .group ? Seq(try row.optionalInt64(2) ?? 0) : nil
            state = .limits(membership: membership)
            return .run(
                """
                SELECT EXISTS (SELECT 1 FROM reaction
                        WHERE message_id = \(message) AND reaction = \(reaction) AND account = \(account)),
                    EXISTS (SELECT 1 FROM reaction_count WHERE message_id = \(message) AND reaction = \(reaction)),
                    (SELECT count(*) FROM reaction WHERE message_id = \(message) AND account = \(account)),
                    (SELECT count(*) FROM reaction_count WHERE message_id = \(message))
                """
            )
        case .limits(let membership):
            guard let row = rows?.first else { throw .failed("The reaction's limits could not be read.") }
            let (has, counted) = (try row.bool(0), try row.bool(1))
            let (mine, distinct) = (try row.int(2), try row.int(3))
            var writes: [SQLQuery] = []
            if write.add, !has {
                guard mine < ReactRequest.maxPerAccount, counted || distinct < ReactRequest.maxPerMessage else {
                    throw .reactionRefused(.tooMany)
                }
                writes = [
                    """
                    INSERT INTO reaction (message_id, reaction, account, conversation_id, time)
                    VALUES (\(message), \(reaction), \(account), \(write.conversation.rawValue), \(write.time.rawValue))
                    """,
                    counted
                        ? "UPDATE reaction_count SET total = total + 1 WHERE message_id = \(message) AND reaction = \(reaction)"
                        : "INSERT INTO reaction_count (message_id, reaction, total) VALUES (\(message), \(reaction), 1)",
                ]
            } else if !write.add, has {
                writes = [
                    "DELETE FROM reaction WHERE message_id = \(message) AND reaction = \(reaction) AND account = \(account)",
                    "UPDATE reaction_count SET total = total - 1 WHERE message_id = \(message) AND reaction = \(reaction)",
                    "DELETE FROM reaction_count WHERE message_id = \(message) AND reaction = \(reaction) AND total <= 0",
                ]
            }
            state = .written(membership: membership, changed: !writes.isEmpty, writes: writes)
            return try step(nil)
        case .written(let membership, let changed, var writes):
            if !writes.isEmpty {
                let next = writes.removeFirst()
                state = .written(membership: membership, changed: changed, writes: writes)
                return .run(next)
            }
            state = .version(membership: membership, changed: changed)
            // A change takes the transaction's stamp, or one past the version it replaces when that is higher (on
            // PostgreSQL the stamp is taken before the row's lock), as a profile's version does (ADR 0053).
            return .run(
                changed
                    ? """
                    UPDATE message SET reaction_version =
                        CASE WHEN change_stamp() > reaction_version THEN change_stamp() ELSE reaction_version + 1 END
                    WHERE id = \(message) RETURNING reaction_version
                    """
                    : "SELECT reaction_version FROM message WHERE id = \(message)"
            )
        case .version(let membership, let changed):
            let version = try rows?.first?.int64(0) ?? 0
            state = .counts(membership: membership, changed: changed, version: version)
            return .run("SELECT reaction, total FROM reaction_count WHERE message_id = \(message) ORDER BY reaction")
        case .counts(let membership, let changed, let version):
            let counts = try (rows ?? []).map { row throws(StorageError) in
                ReactionCount(reaction: try row.string(0), count: try row.int(1))
            }
            state = .mine(membership: membership, changed: changed, version: version, counts: counts)
            return .run(
                "SELECT reaction FROM reaction WHERE message_id = \(message) AND account = \(account) ORDER BY reaction"
            )
        case .mine(let membership, let changed, let version, let counts):
            let mine = try (rows ?? []).map { row throws(StorageError) in try row.string(0) }
            let reactions = WireReactions(messageID: write.message, counts: counts, mine: mine, version: version)
            guard changed else { return .done(ReactionOutcome(reactions: reactions, change: nil)) }
            let event = ReactionEvent(
                conversation: write.conversation,
                messageID: write.message,
                account: write.account,
                reaction: write.reaction,
                added: write.add,
                counts: counts,
                version: version
            )
            let change = Change.reacted(event, at: write.time, membershipVersion: membership)
            let pending = change.webhookEvents.map { WebhookEventDraft.insert($0, atLeast: 0) }
                + [try notify(.change(change))].compactMap { $0 }
            state = .recording(ReactionOutcome(reactions: reactions, change: change), pending: pending)
            return try step(nil)
        case .recording(let outcome, var pending):
            guard !pending.isEmpty else { return .done(outcome) }
            let next = pending.removeFirst()
            state = .recording(outcome, pending: pending)
            return .run(next)
        }
    }
}

/// The reactions of several messages of one conversation, with one reader's own, in one snapshot.
struct ReactionsProcedure: SQLProcedure {
    let messages: [MessageID]
    let conversation: ConversationID
    let viewer: AccountID
    private var versions: [MessageID: Int64]?
    private var counts: [MessageID: [ReactionCount]]?

    init(messages: [MessageID], conversation: ConversationID, viewer: AccountID) {
        self.messages = messages
        self.conversation = conversation
        self.viewer = viewer
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<[WireReactions]> {
        let ids = messages.map(\.rawValue)
        guard let versions else {
            guard let rows else {
                return .run(
                    """
                    SELECT id, reaction_version FROM message
                    WHERE id IN \(list: ids) AND conversation_id = \(conversation.rawValue)
                    """
                )
            }
            var found: [MessageID: Int64] = [:]
            for row in rows { found[MessageID(rawValue: try row.string(0))] = try row.int64(1) }
            self.versions = found
            return .run(
                """
                SELECT message_id, reaction, total FROM reaction_count
                WHERE message_id IN \(list: ids) ORDER BY message_id, reaction
                """
            )
        }
        guard let counts else {
            var found: [MessageID: [ReactionCount]] = [:]
            for row in rows ?? [] {
                found[MessageID(rawValue: try row.string(0)), default: []].append(
                    ReactionCount(reaction: try row.string(1), count: try row.int(2))
                )
            }
            self.counts = found
            return .run(
                """
                SELECT message_id, reaction FROM reaction
                WHERE message_id IN \(list: ids) AND account = \(viewer.rawValue) ORDER BY message_id, reaction
                """
            )
        }
        var mine: [MessageID: [String]] = [:]
        for row in rows ?? [] { mine[MessageID(rawValue: try row.string(0)), default: []].append(try row.string(1)) }
        return .done(
            messages.compactMap { id in
                versions[id].map {
                    WireReactions(messageID: id, counts: counts[id] ?? [], mine: mine[id] ?? [], version: $0)
                }
            }
        )
    }
}
