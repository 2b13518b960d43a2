// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
internal import CourierWire

/// What a recall or an edit is decided on, read in its own transaction, and the plan decided from it: the message's
/// row as `query` selects it (locked where the backend locks rows), then, in a group when the roles matter and the
/// row is there, the roles of the account acting and of the message's sender (the caller holds the group's lock where
/// the backend has one, so no role changes before the transaction commits). ``RecallPlan/Facts`` and
/// ``EditPlan/Facts`` make one.
public struct MessageFacts<Plan: Sendable>: SQLProcedure {
    /// In a group when asked for: the actor's and the sender's roles (`nil` for an account that is not a member).
    typealias Roles = (actor: MemberRole?, sender: MemberRole?)
    /// The plan from the message's row (`nil`: none found, or no message named) and the roles.
    typealias Decide = @Sendable (SQLRow?, Roles?) throws(StorageError) -> Plan

    private let query: SQLQuery?
    private let conversation: ConversationID
    /// The actor and the sender, when their roles matter (not for the app's backend).
    private let accounts: (actor: AccountID, sender: AccountID)?
    private let decide: Decide
    private var row: SQLRow??

    /// - Parameter query: `nil` when the entry names no message: the plan is decided on no row.
    init(
        _ query: SQLQuery?,
        in conversation: ConversationID,
        roles accounts: (actor: AccountID, sender: AccountID)?,
        decide: @escaping Decide
    ) {
        self.query = query
        self.conversation = conversation
        self.accounts = accounts
        self.decide = decide
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Plan> {
        guard let query else { return .done(try decide(nil, nil)) }
        guard let rows else { return .run(query) }
        guard let row else {
            let found = rows.first
            guard conversation.kind == .group, let accounts, found != nil else { return .done(try decide(found, nil)) }
            self.row = .some(found)
            return .run(
                """
                SELECT account, role FROM conversation_member
                WHERE conversation_id = \(conversation.rawValue)
                  AND account IN \(list: [accounts.actor.rawValue, accounts.sender.rawValue])
                """
            )
        }
        var roles: [AccountID: MemberRole] = [:]
        for member in rows {
            roles[AccountID(rawValue: try member.string(0))] = MemberRole(rawValue: try member.string(1)) ?? .member
        }
        return .done(try decide(row, accounts.map { (actor: roles[$0.actor], sender: roles[$0.sender]) }))
    }
}
