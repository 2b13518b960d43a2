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
