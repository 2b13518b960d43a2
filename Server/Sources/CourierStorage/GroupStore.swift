// Courier — Apache-2.0
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
    func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult
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
    func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendResult
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
    func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendResult
    /// Read and unread counts of messages that asked for receipts; messages that did not are left out.
    func receiptCounts(in group: ConversationID, seqs: [Seq]) async throws(StorageError) -> [Seq: ReceiptTally]
    /// One page of a message's read, unread or delivered list.
    func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage
}

/// Who was in a group at one point of its log, and the group's membership version when that was read.
public struct GroupMembership: Hashable, Sendable {
    /// The members, in no particular order.
    public let accounts: [AccountID]
    /// The seq of the group's newest membership change (``AppendResult/membershipSeq``) when this was read: a list
    /// read at the version an entry was appended under is that entry's audience.
    public let version: Seq
    public init(accounts: [AccountID], version: Seq) {
        self.accounts = accounts
        self.version = version
    }
}

/// A message's audience and readers (its `receipt_count` row).
public struct ReceiptTally: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let sender: AccountID
    public let audience: Int
    public let readCount: Int
    public var unreadCount: Int { max(0, audience - readCount) }
    public init(messageID: MessageID, sender: AccountID, audience: Int, readCount: Int) {
        self.messageID = messageID
        self.sender = sender
        self.audience = audience
        self.readCount = readCount
    }
}

/// A message newly read by one reader, with its tally after the read (what the sender's devices are told).
public struct GroupReceiptChange: Hashable, Sendable, Codable {
    public let seq: Seq
    public let tally: ReceiptTally
    public init(seq: Seq, tally: ReceiptTally) {
        self.seq = seq
        self.tally = tally
    }
}

/// A receipt list query, resolved by the server (the message is in the group and asked for receipts).
public struct ReceiptListQuery: Hashable, Sendable {
    public let group: ConversationID
    public let seq: Seq
    public let sender: AccountID
    public let list: ReceiptListKind
    /// Only these accounts (sorted, distinct).
    public let accounts: [AccountID]?
    public let cursor: ReceiptCursor?
    public let limit: Int
    public init(
        group: ConversationID,
        seq: Seq,
        sender: AccountID,
        list: ReceiptListKind,
        accounts: [AccountID]?,
        cursor: ReceiptCursor?,
        limit: Int
    ) {
        self.group = group
        self.seq = seq
        self.sender = sender
        self.list = list
        self.accounts = accounts.map { Array(Set($0)).sorted() }
        self.cursor = cursor
        self.limit = limit
    }

    /// The same query, continuing after `cursor`.
    public func with(cursor: ReceiptCursor) -> ReceiptListQuery {
        ReceiptListQuery(
            group: group,
            seq: seq,
            sender: sender,
            list: list,
            accounts: accounts,
            cursor: cursor,
            limit: limit
        )
    }
}

/// One page of a receipt list.
public struct ReceiptPage: Hashable, Sendable {
    public let entries: [ReceiptListEntry]
    public let total: Int
    public let next: ReceiptCursor?
    public init(entries: [ReceiptListEntry], total: Int, next: ReceiptCursor?) {
        self.entries = entries
        self.total = total
        self.next = next
    }
}

/// Where a receipt list page ends. Lists are read in segments, each in its own index order: one-by-one acks (by
/// account), watermark positions (by `(seq, account)`), former members (by account); a filtered list is by account.
/// On the wire it is opaque text: `SEGMENT.SEQ.ACCOUNT`.
public struct ReceiptCursor: Hashable, Sendable {
    public enum Segment: String, Hashable, Sendable {
        case acks = "a"
        case watermarks = "w"
        case former = "f"
        case filtered = "x"
    }
    public let segment: Segment
    public let seq: Seq
    public let account: AccountID
    public init(segment: Segment, seq: Seq, account: AccountID) {
        self.segment = segment
        self.seq = seq
        self.account = account
    }

    /// The cursor as a client holds it, bound to the list it pages: `LIST.MESSAGE_SEQ.SEGMENT.SEQ.ACCOUNT`, e.g.
    /// `r.42.w.57.bob` (the read list of the message at seq 42, after bob's watermark at 57).
    public func text(for query: ReceiptListQuery) -> String {
        "\(Self.listKey(query.list)).\(query.seq.rawValue).\(segment.rawValue).\(seq.rawValue).\(account.rawValue)"
    }

    /// Reads a cursor given back by a client for `query` (whose own `cursor` is ignored); `nil` when it is not one
    /// this list handed out: another message's, another list's, a filtered list's for an unfiltered one or the
    /// other way round, or made up. Such a cursor is refused rather than silently restarting the list.
    public init?(text: String, for query: ReceiptListQuery) {
        let parts = text.split(separator: ".", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == Self.listKey(query.list), Int64(parts[1]) == query.seq.rawValue,
            let segment = Segment(rawValue: String(parts[2])), let seq = Int64(parts[3]), seq >= 0
        else { return nil }
        let segments: Set<Segment> =
            query.accounts != nil ? [.filtered] : query.list == .read ? [.acks, .watermarks, .former] : [.watermarks]
        guard segments.contains(segment) else { return nil }
        let account = AccountID(rawValue: String(parts[4]))
        guard account.isValid else { return nil }
        self.init(segment: segment, seq: Seq(seq), account: account)
    }

    private static func listKey(_ list: ReceiptListKind) -> Substring {
        switch list {
        case .read: "r"
        case .unread: "u"
        default: "d"
        }
    }
}

/// Why a group rule refused a change.
public enum GroupRefusal: Error, Hashable, Sendable {
    case groupNotFound
    case alreadyExists
    /// The actor is not a member.
    case actorNotAMember
    case notPermitted
    case ownerCannotLeave
    /// A named account is not a member.
    case notAMember(AccountID)
    /// Every named account is a member already.
    case alreadyMember
    case alreadyRequested
}

/// The membership rules, one pure implementation for every backend (NIM's defaults: owner and admins invite and
/// remove, only the owner appoints admins and hands the group over).
public enum GroupRules {
    /// Checks a change against the roles involved; returns the accounts it actually changes.
    ///
    /// - Parameters:
    ///   - actorRole: The actor's role, `nil` if not a member.
    ///   - roles: The current role of each named account that is a member.
    public static func check(
        _ change: WireGroupChange,
        actor: AccountID,
        actorRole: MemberRole?,
        roles: [AccountID: MemberRole]
    ) throws(GroupRefusal) -> [AccountID] {
        guard let actorRole else { throw .actorNotAMember }
        switch change.action {
        case .created:
            throw .alreadyExists
        case .added:
            guard actorRole != .member else { throw .notPermitted }
            let new = change.accounts.filter { roles[$0] == nil }
            guard !new.isEmpty else { throw .alreadyMember }
            return new
        case .removed:
            for account in change.accounts {
                guard let role = roles[account] else { throw .notAMember(account) }
                guard account != actor, canManage(actorRole, role) else { throw .notPermitted }
            }
            return change.accounts
        case .left:
            guard actorRole != .owner else { throw .ownerCannotLeave }
            return [actor]
        case .roleChanged:
            guard actorRole == .owner, let role = change.role, role != .owner else { throw .notPermitted }
            for account in change.accounts {
                guard let current = roles[account] else { throw .notAMember(account) }
                guard current != .owner else { throw .notPermitted }
            }
            return change.accounts
        case .ownerTransferred:
            guard actorRole == .owner, change.accounts.count == 1, let heir = change.accounts.first, heir != actor
            else { throw .notPermitted }
            guard roles[heir] != nil else { throw .notAMember(heir) }
            return [heir]
        case .dismissed:
            guard actorRole == .owner else { throw .notPermitted }
            return []
        }
    }

    /// ``check(_:actor:actorRole:roles:)`` with the refusal as a `StorageError`.
    public static func checked(
        _ change: WireGroupChange,
        actor: AccountID,
        actorRole: MemberRole?,
        roles: [AccountID: MemberRole]
    ) throws(StorageError) -> [AccountID] {
        do {
            return try check(change, actor: actor, actorRole: actorRole, roles: roles)
        } catch {
            throw .groupRefused(error)
        }
    }

    /// Whether `actor` may remove a member of role `target` (owner: anyone else; admin: ordinary members).
    public static func canManage(_ actor: MemberRole, _ target: MemberRole) -> Bool {
        switch actor {
        case .owner: target != .owner
        case .admin: target == .member
        case .member: false
        }
    }
}
