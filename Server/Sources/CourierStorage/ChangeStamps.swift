// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Where a sync may resume from (ADR 0017): every change stamped below `stamp` was committed, and is visible to any
/// read that starts after the cursor was taken; `storeID` names the database the stamps come from, so a cursor from
/// another database (a restored backup, a move between backends) is refused rather than trusted.
public struct ChangeCursor: Hashable, Sendable {
    public let storeID: String
    public let stamp: Int64
    public init(storeID: String, stamp: Int64) {
        self.storeID = storeID
        self.stamp = stamp
    }
}

/// A conversation that changed for an account since a stamp: its state as the account sees it, and the seq after
/// which its entries changed (its last seq when only receipts moved).
public struct ChangedConversation: Hashable, Sendable {
    public let state: ConversationState
    public let changedAfter: Seq
    public init(state: ConversationState, changedAfter: Seq) {
        self.state = state
        self.changedAfter = changedAfter
    }
}

/// Change stamps (ADR 0017): each transaction that changes what a member sees of a conversation stamps the rows it
/// writes anyway — the conversation's row and the entry for an append, the `receipt` row for a delivery or read —
/// never one row per member. A reconnect then costs what changed, not what the account holds.
public protocol ChangeStore: Sendable {
    /// The cursor to hand out now. SQLite: one more than the last committed stamp (one writer, so stamps follow commit
    /// order). PostgreSQL: the oldest transaction of this database still running, since a transaction that took its
    /// stamp earlier may commit later; changes at or above it are sent again next time, never skipped.
    func changeCursor() async throws(StorageError) -> ChangeCursor
    /// `account`'s conversations whose log or whose receipts in the account's view (its own; in a direct chat, both
    /// members') carry a stamp at or after `since`, as the account sees them. `changedAfter` is the newest entry
    /// stamped before `since` (`ORDER BY seq DESC LIMIT 1` on the log's index: the walk back costs what changed). Entries
    /// are appended under the conversation's lock, so one committed before the previous sync's cursor has every older
    /// entry committed before it too: the device holds them all.
    func changedConversations(of account: AccountID, since: Int64) async throws(StorageError) -> [ChangedConversation]
}
