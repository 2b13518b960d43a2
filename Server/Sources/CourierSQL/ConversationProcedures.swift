// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Conversation states as `sync` and the API read them, written once for every backend that runs ``SQLQuery``s.
extension ConversationStore where Self: SQLRunner {
    public func conversations(of account: AccountID) async throws(StorageError) -> [ConversationState] {
        try await read(ConversationsProcedure(account: account, since: nil)).map(\.state)
    }

    public func conversation(_ id: ConversationID) async throws(StorageError) -> ConversationState? {
        try await read(ConversationStateProcedure(id, viewer: nil))
    }
}

extension ChangeStore where Self: SQLRunner {
    public func changedConversations(
        of account: AccountID,
        since: Int64
    ) async throws(StorageError) -> [ChangedConversation] {
        try await read(ConversationsProcedure(account: account, since: since))
    }
}

/// A procedure run as a part of another: it is started (given `nil`) on its first step whatever rows the outer
/// procedure holds, then given the rows of the statements it asked for.
struct Nested<Procedure: SQLProcedure>: Sendable {
    private var procedure: Procedure
    private var started = false

    init(_ procedure: Procedure) {
        self.procedure = procedure
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Procedure.Output> {
        defer { started = true }
        return try procedure.step(started ? rows : nil)
    }
}

/// Runs procedures one after the other and collects what each returns.
struct EachProcedure<Element: SQLProcedure>: SQLProcedure {
    private var pending: ArraySlice<Element>
    private var current: Nested<Element>?
    private var outputs: [Element.Output] = []

    init(_ procedures: [Element]) {
        pending = procedures[...]
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<[Element.Output]> {
        while true {
            if current == nil {
                guard let next = pending.popFirst() else { return .done(outputs) }
                current = Nested(next)
            }
            switch try current!.step(rows) {
            case .run(let query): return .run(query)
            case .done(let output):
                outputs.append(output)
                current = nil
            }
        }
    }
}

/// One member's receipts: its shared reading position, or its own (`shared == false`), and what it read one by one
/// above it; with `view`, the account's own view of the conversation too (ADR 0029), read by the same two statements:
/// its row joined to the receipt row, its deleted entries with the read acks.
struct MemberReceiptsProcedure: SQLProcedure {
    let conversation: ConversationID
    let shared: Bool
    let account: AccountID
    let withView: Bool
    private var positions: (delivered: Watermark, read: Watermark)?
    private var view = ConversationView.none

    init(_ conversation: ConversationID, shared: Bool, _ account: AccountID, view: Bool = false) {
        self.conversation = conversation
        self.shared = shared
        self.account = account
        withView = view && !shared
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<(receipts: MemberReceipts, view: ConversationView)> {
        let (id, account) = (conversation.rawValue, self.account.rawValue)
        guard let rows else {
            guard withView else {
                return .run(
                    """
                    SELECT delivered_seq, delivered_time, read_seq, read_time, own_read_seq, own_read_time
                    FROM receipt WHERE conversation_id = \(id) AND account = \(account)
                    """
                )
            }
            // One row whether or not the account has a receipt row or a view.
            return .run(
                """
                SELECT r.delivered_seq, r.delivered_time, r.read_seq, r.read_time, r.own_read_seq, r.own_read_time,
                    v.cleared_seq, v.muted, v.pinned_at, v.hidden_seq
                FROM (SELECT 1 AS one) o
                LEFT JOIN receipt r ON r.conversation_id = \(id) AND r.account = \(account)
                LEFT JOIN conversation_view v ON v.conversation_id = \(id) AND v.account = \(account)
                """
            )
        }
        guard let positions else {
            let row = rows.first
            let watermark = { (seq: Int, time: Int) throws(StorageError) in
                Watermark(
                    seq: Seq(try row?.optionalInt64(seq) ?? 0),
                    time: Timestamp(milliseconds: try row?.optionalInt64(time) ?? 0)
                )
            }
            let read = shared ? try watermark(2, 3) : try watermark(4, 5)
            positions = (try watermark(0, 1), read)
            guard withView, let row else {
                return .run(
                    """
                    SELECT seq, 0 FROM read_ack WHERE conversation_id = \(id) AND account = \(account)
                        AND seq > \(read.seq.rawValue) AND (shared OR \(!shared)) ORDER BY seq
                    """
                )
            }
            view = try ConversationView(row: row, at: 6, deleted: [])
            return .run(
                """
                SELECT seq, 0 FROM read_ack WHERE conversation_id = \(id) AND account = \(account)
                    AND seq > \(read.seq.rawValue)
                UNION ALL
                SELECT seq, 1 FROM deleted_message WHERE conversation_id = \(id) AND account = \(account)
                    AND seq > \(view.cleared.rawValue)
                ORDER BY 2, 1
                """
            )
        }
        var readSeqs: [Seq] = [], deleted: [Seq] = []
        for row in rows {
            let seq = Seq(try row.int64(0))
            if try row.int64(1) == 0 { readSeqs.append(seq) } else { deleted.append(seq) }
        }
        let receipts = MemberReceipts(
            account: self.account,
            delivered: positions.delivered,
            read: positions.read,
            readSeqs: readSeqs
        )
        let view = ConversationView(
            cleared: view.cleared, deletedSeqs: deleted, muted: view.muted, pinnedAt: view.pinnedAt,
            hiddenUpTo: view.hiddenUpTo
        )
        return .done((receipts, view))
    }
}

/// A conversation as `viewer` sees it (its own reading position, what others share), or as every member shares it
/// when `viewer` is `nil`; `nil` if there is no such conversation.
struct ConversationStateProcedure: SQLProcedure {
    private struct Head {
        let kind: ConversationKind
        let lastSeq: Seq
        let lastTime: Timestamp
        let memberCount: Int
        let profile: GroupProfile?
    }

    private enum State {
        case start
        case head
        case groupMember(Head)
        case groupReceipts(Head, GroupMember?, Nested<MemberReceiptsProcedure>)
        case directMembers(Head)
        case directAccounts(Head, members: [AccountID])
        case directReceipts(
            Head,
            members: [AccountID],
            withReceipts: Set<AccountID>,
            Nested<EachProcedure<MemberReceiptsProcedure>>
        )
    }

    let id: ConversationID
    let viewer: AccountID?
    private var state = State.start

    init(_ id: ConversationID, viewer: AccountID?) {
        self.id = id
        self.viewer = viewer
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<ConversationState?> {
        let rows = rows ?? []
        let id = self.id.rawValue
        switch state {
        case .start:
            state = .head
            return .run(
                """
                SELECT kind, last_seq, last_time, member_count, group_name, group_avatar, group_announcement, group_ext
                FROM conversation WHERE id = \(id)
                """
            )
        case .head:
            guard let row = rows.first else { return .done(nil) }
            let head = Head(
                kind: ConversationKind(rawValue: try row.string(0)) ?? .direct,
                lastSeq: Seq(try row.int64(1)),
                lastTime: Timestamp(milliseconds: try row.int64(2)),
                memberCount: try row.int(3),
                profile: try GroupProfile(row, at: 4)
            )
            guard head.kind == .group else {
                state = .directMembers(head)
                return .run("SELECT account FROM conversation_member WHERE conversation_id = \(id) ORDER BY account")
            }
            // A group may have 100,000 members: the viewer gets its own position and the group's size.
            guard let viewer else { return .done(Self.group(self.id, head, member: nil, receipts: [])) }
            state = .groupMember(head)
            return .run(GroupMember.query(viewer, of: self.id))
        case .groupMember(let head):
            let member = try rows.first.map(GroupMember.init)
            state = .groupReceipts(
                head,
                member,
                Nested(MemberReceiptsProcedure(self.id, shared: false, viewer!, view: true))
            )
            return try step(rows)
        case .groupReceipts(let head, let member, var receipts):
            switch try receipts.step(rows) {
            case .run(let query):
                state = .groupReceipts(head, member, receipts)
                return .run(query)
            case .done(let mine):
                return .done(Self.group(self.id, head, member: member, receipts: [mine.receipts]).with(view: mine.view))
            }
        case .directMembers(let head):
            let members = try rows.map { row throws(StorageError) in AccountID(rawValue: try row.string(0)) }
            state = .directAccounts(head, members: members)
            // The members with a receipt row, and the viewer when it has a view but no receipt row (its view is read,
            // and it is not listed among the receipts).
            return .run(
                """
                SELECT account, 1 FROM receipt WHERE conversation_id = \(id)
                UNION ALL
                SELECT account, 0 FROM conversation_view v WHERE v.conversation_id = \(id) AND v.account = \(viewer?.rawValue)
                    AND NOT EXISTS (SELECT 1 FROM receipt r WHERE r.conversation_id = v.conversation_id
                        AND r.account = v.account)
                ORDER BY 1
                """
            )
        case .directAccounts(let head, let members):
            var withReceipts: Set<AccountID> = []
            let accounts = try rows.map { row throws(StorageError) in
                let account = AccountID(rawValue: try row.string(0))
                if try row.int64(1) == 1 { withReceipts.insert(account) }
                return account
            }
            let each = EachProcedure(
                accounts.map { MemberReceiptsProcedure(self.id, shared: $0 != viewer, $0, view: $0 == viewer) }
            )
            state = .directReceipts(head, members: members, withReceipts: withReceipts, Nested(each))
            return try step(rows)
        case .directReceipts(let head, let members, let withReceipts, var each):
            switch try each.step(rows) {
            case .run(let query):
                state = .directReceipts(head, members: members, withReceipts: withReceipts, each)
                return .run(query)
            case .done(let rows):
                return .done(
                    ConversationState(
                        id: self.id,
                        kind: head.kind,
                        members: members,
                        lastSeq: head.lastSeq,
                        lastTime: head.lastTime,
                        receipts: rows.map(\.receipts).filter { withReceipts.contains($0.account) },
                        view: rows.first { $0.receipts.account == viewer }?.view
                    )
                )
            }
        }
    }

    private static func group(
        _ id: ConversationID,
        _ head: Head,
        member: GroupMember?,
        receipts: [MemberReceipts]
    ) -> ConversationState {
        ConversationState(
            id: id,
            kind: .group,
            members: [],
            lastSeq: head.lastSeq,
            lastTime: head.lastTime,
            receipts: receipts,
            group: member.map {
                GroupState(memberCount: head.memberCount, role: $0.role, joinedSeq: $0.joinedSeq, profile: head.profile)
            }
        )
    }
}

/// An account's conversations, each as it sees it: all of them (`since == nil`), or those that changed at or after
/// the stamp `since` (ADR 0017), each with the newest seq written before it. With `since`, a group membership of the
/// account that ended at or after it is listed too, up to the entry that ended it (ADR 0023): a device that was away
/// gets the entry that removed it or dismissed the group, and what came before, and nothing after.
struct ConversationsProcedure: SQLProcedure {
    private struct Listed {
        let id: ConversationID
        let changedAfter: Seq
        /// For a membership that ended: the entry that began it, its last entry, and when that was appended.
        let ended: (joined: Seq, seq: Seq, time: Timestamp)?
    }

    let account: AccountID
    let since: Int64?
    private var listed: [Listed]?
    private var states: Nested<EachProcedure<ConversationStateProcedure>>?

    init(account: AccountID, since: Int64?) {
        self.account = account
        self.since = since
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<[ChangedConversation]> {
        let account = self.account.rawValue
        guard let rows else {
            guard let since else {
                return .run(
                    """
                    SELECT conversation_id, 0, NULL, NULL, NULL FROM conversation_member WHERE account = \(account)
                    ORDER BY conversation_id
                    """
                )
            }
            // O(the account's conversations) in an index scan of integers; states only for what changed.
            return .run(
                """
                SELECT m.conversation_id, COALESCE((
                    SELECT e.seq FROM message e WHERE e.conversation_id = m.conversation_id AND e.stamp < \(since)
                    ORDER BY e.seq DESC LIMIT 1), 0), NULL, NULL, NULL
                FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
                WHERE m.account = \(account) AND (c.stamp >= \(since)
                    OR EXISTS (SELECT 1 FROM receipt r WHERE r.conversation_id = m.conversation_id
                        AND r.account = \(account) AND r.stamp >= \(since))
                    -- Its own view (ADR 0029), never the other member's.
                    OR EXISTS (SELECT 1 FROM conversation_view v WHERE v.conversation_id = m.conversation_id
                        AND v.account = \(account) AND v.stamp >= \(since))
                    -- A direct chat's two rows; never a scan of a group's receipts.
                    OR (c.kind = 'direct' AND EXISTS (SELECT 1 FROM receipt r
                        WHERE r.conversation_id = m.conversation_id AND r.stamp >= \(since))))
                UNION ALL
                SELECT f.conversation_id, COALESCE((
                    SELECT e.seq FROM message e WHERE e.conversation_id = f.conversation_id AND e.stamp < \(since)
                    ORDER BY e.seq DESC LIMIT 1), 0), f.left_seq,
                    (SELECT e.time FROM message e WHERE e.conversation_id = f.conversation_id AND e.seq = f.left_seq),
                    f.joined_seq
                FROM former_member f
                WHERE f.account = \(account) AND f.stamp >= \(since) AND NOT EXISTS (SELECT 1 FROM conversation_member m
                    WHERE m.conversation_id = f.conversation_id AND m.account = \(account))
                ORDER BY 1, 3
                """
            )
        }
        if listed == nil {
            var byID: [ConversationID: Listed] = [:]
            for row in rows {
                let id = ConversationID(rawValue: try row.string(0))
                var ended: (joined: Seq, seq: Seq, time: Timestamp)?
                if let seq = try row.optionalInt64(2) {
                    let joined = Seq(try row.optionalInt64(4) ?? 0)
                    ended = (joined, Seq(seq), Timestamp(milliseconds: try row.optionalInt64(3) ?? 0))
                }
                // Of several memberships that ended since, the last one.
                byID[id] = Listed(id: id, changedAfter: Seq(try row.int64(1)), ended: ended)
            }
            let listed = byID.values.sorted { $0.id.rawValue.utf8.lexicographicallyPrecedes($1.id.rawValue.utf8) }
            self.listed = listed
            let current = listed.filter { $0.ended == nil }
            states = Nested(EachProcedure(current.map { ConversationStateProcedure($0.id, viewer: self.account) }))
        }
        switch try states!.step(rows) {
        case .run(let query): return .run(query)
        case .done(let states):
            var current = states.makeIterator()
            return .done(
                (listed ?? []).compactMap { listed in
                    guard let ended = listed.ended else {
                        return current.next()?.map { ChangedConversation(state: $0, changedAfter: listed.changedAfter) }
                    }
                    // No longer a member: the log of that membership — from the entry that began it to the one that
                    // ended it — and nothing to share.
                    let state = ConversationState(
                        id: listed.id,
                        kind: .group,
                        members: [],
                        lastSeq: ended.seq,
                        lastTime: ended.time,
                        receipts: [],
                        syncFrom: Seq(max(0, ended.joined.rawValue - 1))
                    )
                    return ChangedConversation(state: state, changedAfter: listed.changedAfter)
                }
            )
        }
    }
}

extension GroupProfile {
    /// From `group_name, group_avatar, group_announcement, group_ext` at `column`: `nil` when none is set.
    init?(_ row: SQLRow, at column: Int) throws(StorageError) {
        let ext = try EntryJSON.decode([String: String].self, try row.optionalString(column + 3))
        self.init(
            name: try row.optionalString(column),
            avatar: try row.optionalString(column + 1),
            announcement: try row.optionalString(column + 2),
            ext: ext
        )
        if isEmpty { return nil }
    }
}
