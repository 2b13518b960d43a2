// Courier — Apache-2.0
public import CourierWire

/// Groups' members, receipt counts and lists, written once for every backend that runs ``SQLQuery``s.
extension GroupStore where Self: SQLRunner {
    public func owner(of group: ConversationID) async throws(StorageError) -> AccountID? {
        try await readRows(
            "SELECT account FROM conversation_member WHERE conversation_id = \(group.rawValue) AND role = 'owner' LIMIT 1"
        ).first.map { row throws(StorageError) in AccountID(rawValue: try row.string(0)) }
    }

    public func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool {
        try await readRows("SELECT kind FROM conversation WHERE id = \(group.rawValue) AND dismissed_seq IS NULL")
            .first?.string(0) == ConversationKind.group.rawValue
    }

    public func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int) {
        try await read(GroupMembersProcedure(group: group, after: after, limit: limit))
    }

    public func memberAccounts(of group: ConversationID) async throws(StorageError) -> [AccountID] {
        try await readRows("SELECT account FROM conversation_member WHERE conversation_id = \(group.rawValue)")
            .map { row throws(StorageError) in AccountID(rawValue: try row.string(0)) }
    }

    public func receiptCounts(in group: ConversationID, seqs: [Seq]) async throws(StorageError) -> [Seq: ReceiptTally] {
        var tallies: [Seq: ReceiptTally] = [:]
        for row in try await readRows(ReceiptTally.query(group, seqs: Array(Set(seqs)))) {
            tallies[Seq(try row.int64(4))] = try ReceiptTally(row)
        }
        return tallies
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        try await read(ReceiptListProcedure(query))
    }
}

/// A page of a group's members by account, and how many it has, from one snapshot.
struct GroupMembersProcedure: SQLProcedure {
    let group: ConversationID
    let after: AccountID?
    let limit: Int
    private var members: [GroupMember]?

    init(group: ConversationID, after: AccountID?, limit: Int) {
        self.group = group
        self.after = after
        self.limit = limit
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<(members: [GroupMember], total: Int)> {
        guard let rows else {
            return .run(
                """
                SELECT account, role, joined_seq FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND account > \(after?.rawValue ?? "") ORDER BY account LIMIT \(limit)
                """
            )
        }
        guard let members else {
            members = try rows.map(GroupMember.init)
            return .run("SELECT member_count FROM conversation WHERE id = \(group.rawValue)")
        }
        return .done((members, try rows.first?.int(0) ?? 0))
    }
}

/// Refuses with ``StorageError/accountNotFound(_:)`` the first of `accounts` that is not registered.
public struct AccountCheck: SQLProcedure {
    let accounts: [AccountID]

    public init(_ accounts: [AccountID]) {
        self.accounts = accounts
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Void> {
        guard !accounts.isEmpty else { return .done(()) }
        guard let rows else { return .run("SELECT id FROM account WHERE id IN \(list: accounts.map(\.rawValue))") }
        let known = Set(try rows.map { row throws(StorageError) in try row.string(0) })
        if let missing = accounts.first(where: { !known.contains($0.rawValue) }) { throw .accountNotFound(missing) }
        return .done(())
    }
}

/// Creates a direct conversation and its two members, on its first entry: both accounts must be registered. The
/// backend has checked that the conversation does not exist yet (a racing creator's rows are left as they are).
public struct CreateDirectConversation: SQLProcedure {
    private let conversation: ConversationID
    private var check: Nested<AccountCheck>
    private var writes: [SQLQuery] = []

    /// - Throws: ``StorageError/conversationNotFound(_:)`` when `conversation` is not a direct conversation's id.
    public init(_ conversation: ConversationID) throws(StorageError) {
        guard let (first, second) = conversation.directMembers else { throw .conversationNotFound(conversation) }
        self.conversation = conversation
        check = Nested(AccountCheck([first, second]))
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Void> {
        if writes.isEmpty {
            switch try check.step(rows) {
            case .run(let query): return .run(query)
            case .done:
                let (id, members) = (conversation.rawValue, [conversation.directMembers!.0, conversation.directMembers!.1])
                writes = [
                    """
                    INSERT INTO conversation (id, kind, member_count) VALUES (\(id), 'direct', 2)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    """
                    INSERT INTO conversation_member (conversation_id, account)
                    SELECT \(id), value FROM \(list: members.map(\.rawValue)) AS l WHERE true ON CONFLICT DO NOTHING
                    """,
                ]
                return .run(writes[0])
            }
        }
        writes.removeFirst()
        guard let next = writes.first else { return .done(()) }
        return .run(next)
    }
}
