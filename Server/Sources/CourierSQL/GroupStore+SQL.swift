// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
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

    public func membership(of group: ConversationID, before seq: Seq?) async throws(StorageError) -> GroupMembership {
        try await read(GroupMembershipProcedure(group: group, before: seq))
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

/// The members of a group just before one entry, then the group's membership version. The members are read first, in
/// one statement (one snapshot): when the version read after them is the one an entry was appended under, no change
/// committed in between, and the list is the membership in force at that version.
struct GroupMembershipProcedure: SQLProcedure {
    let group: ConversationID
    let before: Seq?
    private var accounts: [AccountID]?

    init(group: ConversationID, before: Seq?) {
        self.group = group
        self.before = before
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<GroupMembership> {
        let (id, seq) = (group.rawValue, before?.rawValue ?? Int64.max)
        guard let rows else {
            // A member whose membership began before the entry, and one whose membership covered the entry's place
            // and ended at it or later (a removal's entry goes to the removed too: its accounts are named).
            return .run(
                """
                SELECT account FROM conversation_member WHERE conversation_id = \(id) AND joined_seq < \(seq)
                UNION ALL
                SELECT account FROM former_member
                WHERE conversation_id = \(id) AND joined_seq < \(seq) AND left_seq >= \(seq)
                """
            )
        }
        guard let accounts else {
            accounts = try rows.map { row throws(StorageError) in AccountID(rawValue: try row.string(0)) }
            return .run("SELECT membership_seq FROM conversation WHERE id = \(id)")
        }
        return .done(GroupMembership(accounts: accounts, version: Seq(try rows.first?.int64(0) ?? 0)))
    }
}
