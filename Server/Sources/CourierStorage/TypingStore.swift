// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// What typing indicators read (ADR 0050). An indicator itself is never stored: only the account's setting is.
public protocol TypingStore: Sendable {
    /// Whether `account`'s typing is shown to others (`true` unless it turned it off; `true` for an unknown account).
    func sendsTypingIndicators(_ account: AccountID) async throws(StorageError) -> Bool
    /// Turns `account`'s typing indicators on or off, on every device.
    func setSendsTypingIndicators(_ value: Bool, for account: AccountID) async throws(StorageError)
    /// What an indicator of `account` in `conversation` needs, from one snapshot: its setting, and in a group
    /// whether it is a member and the group's membership version (for its member list, ``GroupMembership``).
    func typingCheck(of account: AccountID, in conversation: ConversationID) async throws(StorageError) -> TypingCheck
    /// Tells the other nodes sharing the database of `content` now, outside any transaction (PostgreSQL
    /// `pg_notify`); nothing where one node is the only writer (SQLite).
    func tellOtherNodes(_ content: ChangeNotice.Content) async throws(StorageError)
}

/// What ``TypingStore/typingCheck(of:in:)`` read.
public struct TypingCheck: Sendable, Hashable {
    /// The account's setting.
    public var sendsTypingIndicators: Bool
    /// In a group that exists (and was not dismissed): its membership version; `nil` otherwise.
    public var membershipVersion: Seq?
    /// In a group: whether the account is a member now.
    public var isMember: Bool

    public init(sendsTypingIndicators: Bool, membershipVersion: Seq?, isMember: Bool) {
        self.sendsTypingIndicators = sendsTypingIndicators
        self.membershipVersion = membershipVersion
        self.isMember = isMember
    }
}
