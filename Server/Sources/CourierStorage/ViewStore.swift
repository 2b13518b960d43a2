// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// An account's own view of its conversations (ADR 0029): cleared, deleted for it, muted, pinned. Kept in a row of
/// its own (`conversation_view`, stamped, so that `sync` brings it to the account alone) and `deleted_message` rows
/// above the cleared seq.
public protocol ViewStore: Sendable {
    /// Applies `write` in one transaction and returns its change, ``Change/viewChanged(_:account:view:)`` with the
    /// view after it; `nil`, with nothing written, when `write.account` is not a member of the conversation when the
    /// transaction runs. `deleteSeqs` at or below the cleared seq are already hidden and are not stored.
    func changeView(_ write: ViewWrite) async throws(StorageError) -> Change?
    /// `account`'s view of `conversation` (``ConversationView/none`` when it has none).
    func view(of account: AccountID, in conversation: ConversationID) async throws(StorageError) -> ConversationView
}

/// What a `changeView` request changes, resolved by the service (message ids to seqs: a message's seq never changes).
public struct ViewWrite: Hashable, Sendable {
    public let account: AccountID
    public let conversation: ConversationID
    public var deleteSeqs: [Seq] = []
    /// Clear every entry up to the conversation's newest when the transaction runs.
    public var clear = false
    public var muted: Bool?
    /// Pinned now (at `now`), unpinned, or unchanged.
    public var pinned: Bool?
    /// Hidden up to the conversation's newest entry when the transaction runs, shown again, or unchanged.
    public var hidden: Bool?
    public let now: Timestamp

    public init(account: AccountID, conversation: ConversationID, now: Timestamp) {
        self.account = account
        self.conversation = conversation
        self.now = now
    }
}
