// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// What a recall or an edit is decided on, read in its own transaction: the message's row as `query` selects it
/// (locked where the backend locks rows), then, in a group when the roles matter and the row is there, the roles of
/// the account acting and of the message's sender (the caller holds the group's lock where the backend has one, so no
/// role changes before the transaction commits).
struct MessageFacts: SQLProcedure {
    struct Found: Sendable {
        /// The message's row; `nil` when `query` found none.
        let row: SQLRow?
        /// In a group when asked for: the actor's and the sender's roles (`nil` for an account that is not a member).
        let roles: (actor: MemberRole?, sender: MemberRole?)?
    }

    private let query: SQLQuery
    private let conversation: ConversationID
    /// The actor and the sender, when their roles matter (not for the app's backend).
    private let accounts: (actor: AccountID, sender: AccountID)?
    private var row: SQLRow??

    init(_ query: SQLQuery, in conversation: ConversationID, roles accounts: (actor: AccountID, sender: AccountID)?) {
        self.query = query
        self.conversation = conversation
        self.accounts = accounts
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Found> {
        guard let rows else { return .run(query) }
        guard let row else {
            let found = rows.first
            guard conversation.kind == .group, let accounts, found != nil else {
                return .done(Found(row: found, roles: nil))
            }
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
        let accounts = self.accounts.map { (actor: roles[$0.actor], sender: roles[$0.sender]) }
        return .done(Found(row: row, roles: accounts))
    }
}
