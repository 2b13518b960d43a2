// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// Runs a group change's plan in the caller's transaction: its entry, then its writes.
    func apply(_ plan: GroupChangePlan, on connection: PostgresConnection) async throws -> AppendOutcome {
        try await connection.run(AccountCheck(plan.accountsToCheck), logger: logger)
        let result = try await insertEntry(plan.entry, on: connection)
        try await connection.run(GroupChangeProcedure(plan, entry: result.message), logger: logger)
        return result
    }

    /// Locks `group`'s row until commit; `false` if it is not a group or was dismissed.
    func lockGroup(_ group: ConversationID, on connection: PostgresConnection) async throws -> Bool {
        try await connection.query(
            "SELECT kind FROM conversation WHERE id = \(group.rawValue) AND dismissed_seq IS NULL FOR UPDATE",
            logger: logger
        ).decode(String.self).first { _ in true } == ConversationKind.group.rawValue
    }

    func memberRow(
        _ account: AccountID,
        of group: ConversationID,
        on connection: PostgresConnection
    ) async throws -> GroupMember? {
        try await connection.run(MemberRow.self, .of(group.rawValue, account.rawValue), logger: logger).first.map {
            let (account, roleName, joined) = try $0.decode((String, String, Int64).self)
            let role = MemberRole(rawValue: roleName) ?? .member
            return GroupMember(account: AccountID(rawValue: account), role: role, joinedSeq: Seq(joined))
        }
    }

    enum MemberRow: HotStatement {
        static let sql = "SELECT account, role, joined_seq FROM conversation_member WHERE conversation_id = $1 AND account = $2"
    }

}
