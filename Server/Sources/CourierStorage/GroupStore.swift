// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Groups, their membership, and group read receipts (SPEC §5, §7).
///
/// Membership changes are entries of the group's log, appended in the same transaction that applies them. Group
/// receipts are derived, never stored per (message, member): each member has the read watermark of its `receipt`
/// row (plus the few messages above it acked one by one), and each message that asked for receipts has one
/// `receipt_count` row with its audience size and read count, which a read moves by one per message it newly covers.
/// docs/architecture.md states the cost of every operation.
public protocol GroupStore: Sendable {
    /// Creates the group of `entry.conversation` with the entry's sender as owner and `members` as members, and
    /// appends the `created` entry (seq 1). Idempotent on `(sender, clientID)`.
    ///
    /// - Throws: `.groupRefused(.alreadyExists)`, `.accountNotFound`.
    func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendOutcome
    /// Applies `entry.group` (added, removed, left, roleChanged, ownerTransferred, dismissed), checking the roles
    /// with ``GroupRules`` inside the transaction, and appends the entry. Idempotent on `(sender, clientID)`.
    ///
    /// Every change records its entry's seq as the group's membership version (``GroupMembership/version``).
    ///
    /// A dismissal appends the group's last entry and ends every membership at once, in a constant number of
    /// statements whatever the group's size: each member becomes a former member whose membership ended at the
    /// dismissal (so the entry's audience can still be read, ``membership(of:before:)``); positions, one-by-one acks
    /// and receipt tallies go (no request can name the group any more, so nothing could read them); the log stays.
    /// From then on ``groupExists(_:)`` is `false` and the id is never reused (`createGroup` answers
    /// `alreadyExists`).
    func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome
    /// One member, or `nil` if `account` is not (or no longer) a member.
    func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember?
    /// The group's owner, or `nil` if there is no such group.
    func owner(of group: ConversationID) async throws(StorageError) -> AccountID?
    /// Whether the group exists (and was not dismissed).
    func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool
    /// A page of members in account order after `after`, and the member count.
    func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int)
    /// The members of `group` just before the entry at `seq` (every member now when `nil`), from what is committed,
    /// and the group's membership version now: the audience of that entry (SPEC §5: the membership when it was
    /// sent), for fan-out. Callers cache it under its version.
    func membership(of group: ConversationID, before seq: Seq?) async throws(StorageError) -> GroupMembership
    /// Appends a receipt request for the message `entry.receiptRequest` and makes it ask for receipts, counting its
    /// audience and readers as of now. Idempotent on `(sender, clientID)`.
    ///
    /// - Throws: `.groupRefused(.alreadyRequested)` when the message asks already.
    func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendOutcome
    /// Read and unread counts of messages that asked for receipts; messages that did not are left out.
    func receiptCounts(in group: ConversationID, seqs: [Seq]) async throws(StorageError) -> [Seq: ReceiptTally]
    /// One page of a message's read, unread or delivered list.
    func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage
}

/// Who was in a group at one point of its log, and the group's membership version when that was read.
public struct GroupMembership: Hashable, Sendable {
    /// The members, in no particular order.
    public let accounts: [AccountID]
    /// The seq of the group's newest membership change (``AppendOutcome/membershipSeq``) when this was read: a list
    /// read at the version an entry was appended under is that entry's audience.
    public let version: Seq
    public init(accounts: [AccountID], version: Seq) {
        self.accounts = accounts
        self.version = version
    }
}
