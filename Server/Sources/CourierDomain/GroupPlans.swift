// Courier — Apache-2.0
public import CourierWire

/// What a membership change does, decided once for every backend: from the roles the backend read in its
/// transaction, the entry to append and the writes that follow it. A backend provides the primitives — read the
/// roles, check accounts exist, append the entry, and run each ``Write`` — and nothing else of the rules.
public struct GroupChangePlan: Sendable {
    public enum Write: Sendable, Hashable {
        /// The accounts join with `role`; their positions start at the change's entry (nothing before it counts for
        /// them).
        case join([AccountID], role: MemberRole)
        /// The account leaves, as ``LeavePlan`` says.
        case leave(AccountID)
        case setRole([AccountID], MemberRole)
        /// Every membership ends at once; the change's entry is the group's last.
        case dismiss
        /// The group's profile takes these fields (``GroupProfile/applying(_:)``).
        case setProfile(GroupProfile)
    }

    /// The entry to append: the change as applied, naming only the accounts it changes.
    public let entry: MessageDraft
    /// Accounts that must be registered before anything is written (``StorageError/accountNotFound(_:)``).
    public let accountsToCheck: [AccountID]
    /// What follows the entry, in order.
    public let writes: [Write]

    /// A change to an existing group.
    ///
    /// - Parameters:
    ///   - entry: The change as asked (`entry.group` set).
    ///   - actorRole: The sender's role, `nil` if not a member.
    ///   - roles: The current role of each account the change names that is a member.
    /// - Throws: ``StorageError/groupRefused(_:)`` with the rule that refuses it (``GroupRules``).
    public init(_ entry: MessageDraft, actorRole: MemberRole?, roles: [AccountID: MemberRole]) throws(StorageError) {
        guard let change = entry.group else { throw .groupRefused(.notPermitted) }
        let changed = try GroupRules.checked(change, actor: entry.sender, actorRole: actorRole, roles: roles)
        self.entry = entry.with(
            group: WireGroupChange(action: change.action, accounts: changed, role: change.role, profile: change.profile)
        )
        accountsToCheck = change.action == .added ? changed : []
        switch change.action {
        case .added: writes = [.join(changed, role: .member)]
        case .removed, .left: writes = changed.map(Write.leave)
        case .roleChanged: writes = [.setRole(changed, change.role ?? .member)]
        // The heir becomes the owner, the former owner an ordinary member.
        case .ownerTransferred: writes = [.setRole([changed[0]], .owner), .setRole([entry.sender], .member)]
        case .dismissed: writes = [.dismiss]
        case .profileChanged: writes = change.profile.map { [.setProfile($0)] } ?? []
        case .created: writes = []
        }
    }

    /// A new group: its creator is the owner, the other members join as members, all at the creation entry.
    public init(creating entry: MessageDraft, members: [AccountID]) {
        let others = members.filter { $0 != entry.sender }
        self.entry = entry
        accountsToCheck = [entry.sender] + others
        writes = [.join([entry.sender], role: .owner)] + (others.isEmpty ? [] : [.join(others, role: .member)])
    }
}

/// What a member's leaving keeps and what it drops (SPEC §5: members who leave drop out of the unread list; what they
/// read stays read).
public struct LeavePlan: Sendable {
    /// The frozen position kept for the receipt lists (`former_member`).
    public let joinedSeq: Seq
    public let leftSeq: Seq
    public let readSeq: Seq
    public let readAt: Timestamp
    public let acks: [FormerMember.Ack]
    /// Messages asking for receipts above this seq, not sent by the leaver and not in ``acks``, lose it from their
    /// audience: it had not read them.
    public var unreadAbove: Seq { max(readSeq, joinedSeq) }
    /// ``acks`` in the form the former-member row stores them.
    public var encodedAcks: String { FormerMember.encode(acks) }

    /// - Parameters:
    ///   - member: The membership that ends.
    ///   - shared: Its shared reading position (watermark and when it moved), `nil` when it has no receipt row: it
    ///     read nothing since it joined.
    ///   - acks: Its shared one-by-one reads above that watermark.
    ///   - seq: The entry that ends the membership.
    public init(member: GroupMember, shared: (seq: Seq, at: Timestamp)?, acks: [FormerMember.Ack], at seq: Seq) {
        joinedSeq = member.joinedSeq
        leftSeq = seq
        readSeq = shared?.seq ?? member.joinedSeq
        readAt = shared?.at ?? .zero
        self.acks = acks
    }
}

/// A member's receipt position as a receipt list sees it, for one message.
public struct ListPosition: Sendable, Hashable {
    public let readSeq: Seq
    public let readAt: Timestamp
    public let deliveredSeq: Seq
    public let deliveredAt: Timestamp
    /// When it acked the message one by one and shared it, if it did.
    public let ackTime: Timestamp?
    public init(readSeq: Seq, readAt: Timestamp, deliveredSeq: Seq, deliveredAt: Timestamp, ackTime: Timestamp?) {
        self.readSeq = readSeq
        self.readAt = readAt
        self.deliveredSeq = deliveredSeq
        self.deliveredAt = deliveredAt
        self.ackTime = ackTime
    }
}

/// Where an account falls in one message's receipt list.
public enum ListPlacement: Sendable, Hashable {
    /// Read at that time; its entry carries the note left with the ack, if any.
    case read(Timestamp)
    case unread
    case delivered(Timestamp)

    public var time: Timestamp? {
        switch self {
        case .read(let time), .delivered(let time): time
        case .unread: nil
        }
    }
    /// Whether the entry carries the ack's note (read lists only).
    public var carriesContent: Bool {
        if case .read = self { return true }
        return false
    }
}

extension ReceiptListQuery {
    /// Which of this query's list an account falls in, and when (`nil`: not in it).
    ///
    /// - Parameters:
    ///   - position: Its position, if it is a member that joined before the message.
    ///   - former: Its frozen position, if a membership that covered the message ended (read lists count it).
    public func placement(of position: ListPosition?, former: FormerMember?) -> ListPlacement? {
        guard let position else {
            // Not a member of the message's audience any more: a reader stays a reader.
            return list == .read ? former?.read(seq).map(ListPlacement.read) : nil
        }
        let readTime = position.readSeq >= seq ? position.readAt : position.ackTime
        switch list {
        case .read: return readTime.map(ListPlacement.read)
        case .unread: return readTime == nil ? .unread : nil
        default: return position.deliveredSeq >= seq ? .delivered(position.deliveredAt) : nil
        }
    }
}
