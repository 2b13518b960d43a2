// Courier — Apache-2.0

/// A member's role in a group (NIM `NIMTeamMemberType`: owner, manager, normal).
public enum MemberRole: String, Hashable, Sendable, Codable, CaseIterable {
    /// Created the group or was handed it; one per group. May do everything, and recall anyone's message.
    case owner
    /// Manages members; may recall ordinary members' messages.
    case admin
    /// An ordinary member.
    case member
}

/// Who may ask a group for read receipts (server setting `receipts.group.requesters`).
public struct ReceiptRequesters: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// Any member (NIM, RongCloud). The default.
    public static let anyMember = ReceiptRequesters(rawValue: "anyMember")
    /// Only the owner and admins (Agora).
    public static let ownerAndAdmins = ReceiptRequesters(rawValue: "ownerAndAdmins")
    public static let all: [ReceiptRequesters] = [.anyMember, .ownerAndAdmins]
}

/// A membership change, as an entry of the group's log (`WireMessage.group`); its `sender` is who made it.
public struct WireGroupChange: Hashable, Sendable, Codable {
    public enum Action: String, Hashable, Sendable, Codable {
        /// The group was created with `accounts` as members (the creator is the owner).
        case created
        /// `accounts` joined.
        case added
        /// `accounts` were removed by the entry's sender.
        case removed
        /// The sender left.
        case left
        /// `accounts` now have `role`.
        case roleChanged
        /// `accounts[0]` is the new owner; the sender became an ordinary member.
        case ownerTransferred
        /// The owner (the sender) dismissed the group (NIM `dismissTeam`, Agora `destroyGroup`, RongCloud
        /// `group/dismiss`): every member left it at once and the group is gone; `accounts` is empty. It is the
        /// group's last entry.
        case dismissed
        /// The group's profile changed (`profile`: the fields that changed); `accounts` is empty.
        case profileChanged
    }
    public let action: Action
    public let accounts: [AccountID]
    /// For `roleChanged`: the new role.
    public let role: MemberRole?
    /// For `profileChanged`: the fields set (an empty text cleared its field); for `created`, the first profile.
    public let profile: GroupProfile?
    public init(action: Action, accounts: [AccountID], role: MemberRole? = nil, profile: GroupProfile? = nil) {
        self.action = action
        self.accounts = accounts
        self.role = role
        self.profile = profile
    }
}

/// What a group shows of itself (NIM `NIMTeam` name, avatarUrl, announcement, clientCustomInfo; Agora `AgoraChatGroup`
/// groupName, description, ext; RongCloud group info name and portraitUri): set by its owner and admins, kept with
/// the group, and told to every member in order as a `profileChanged` entry of its log. Each field is optional: in a
/// change, an absent field stays as it was and an empty text clears it.
public struct GroupProfile: Hashable, Sendable, Codable {
    /// At most 100 characters.
    public let name: String?
    /// Where the group's picture is (an `https` address, or a media address of this server; at most 2,048 bytes).
    public let avatar: String?
    /// At most 4,096 bytes.
    public let announcement: String?
    /// Key-values of the app's own (as a message's `ext`: at most 64 keys of 1–64 characters, 4,096 bytes in all).
    public let ext: [String: String]?

    public init(name: String? = nil, avatar: String? = nil, announcement: String? = nil, ext: [String: String]? = nil) {
        self.name = name
        self.avatar = avatar
        self.announcement = announcement
        self.ext = ext
    }

    /// Nothing set.
    public var isEmpty: Bool { name == nil && avatar == nil && announcement == nil && ext == nil }

    /// This profile with `change` applied: a field present replaces, an empty text clears (`nil`), an empty `ext`
    /// clears it.
    public func applying(_ change: GroupProfile) -> GroupProfile {
        func merged(_ new: String?, _ old: String?) -> String? {
            guard let new else { return old }
            return new.isEmpty ? nil : new
        }
        let ext = change.ext.map { $0.isEmpty ? nil : $0 } ?? self.ext
        return GroupProfile(
            name: merged(change.name, name),
            avatar: merged(change.avatar, avatar),
            announcement: merged(change.announcement, announcement),
            ext: ext
        )
    }

    /// What is wrong with it as a change, or `nil` when it may be applied.
    public var invalidity: String? {
        if isEmpty { return "A profile change names at least one of name, avatar, announcement and ext." }
        if let name, name.count > 100 { return "name is at most 100 characters." }
        if let avatar, avatar.utf8.count > 2048 { return "avatar is at most 2,048 bytes." }
        if let announcement, announcement.utf8.count > 4096 { return "announcement is at most 4,096 bytes." }
        if let ext, !ext.isEmpty, !WireMessage.isValidExt(ext) {
            return "ext holds at most 64 keys of 1–64 characters and \(WireMessage.maxExtBytes) bytes in all."
        }
        return nil
    }
}

/// What a member sees of its group in a `sync` ack (`ConversationState.group`). The member list itself is paged
/// with `groupMembers`: a group may have 100,000 members.
public struct GroupState: Hashable, Sendable, Codable {
    public let memberCount: Int
    /// The caller's role.
    public let role: MemberRole
    /// The seq of the entry that made the caller a member; the caller's history starts after it.
    public let joinedSeq: Seq
    /// The group's profile now; `nil` when nothing was ever set.
    public let profile: GroupProfile?
    public init(memberCount: Int, role: MemberRole, joinedSeq: Seq, profile: GroupProfile? = nil) {
        self.memberCount = memberCount
        self.role = role
        self.joinedSeq = joinedSeq
        self.profile = profile
    }
}

/// `createGroup`: create a group with the caller as owner. Idempotent on `(caller, clientId)`.
public struct CreateGroupRequest: Hashable, Sendable, Codable {
    public let group: GroupID
    public let clientID: ClientMessageID
    /// The other first members (at most `maxGroupChangeAccounts`); add more with `groupChange`.
    public let members: [AccountID]
    public init(group: GroupID, clientID: ClientMessageID, members: [AccountID]) {
        self.group = group
        self.clientID = clientID
        self.members = members
    }
    enum CodingKeys: String, CodingKey {
        case group
        case clientID = "clientId"
        case members
    }
}

/// `groupChange`: change a group's membership. Idempotent on `(caller, clientId)`. The ack is the log entry.
///
/// | action | fields | who may |
/// | --- | --- | --- |
/// | `add` | `accounts` | owner, admins |
/// | `remove` | `accounts` | owner (anyone else), admins (ordinary members) |
/// | `leave` | – | anyone but the owner (transfer ownership first) |
/// | `setRole` | `accounts`, `role` (`admin` or `member`) | owner |
/// | `transferOwnership` | `accounts` (exactly one member) | owner, who becomes an ordinary member |
/// | `dismiss` | – | owner: every member leaves and the group is gone (NIM `dismissTeam`) |
public struct GroupChangeRequest: Hashable, Sendable, Codable {
    public struct Action: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        public static let add = Action(rawValue: "add")
        public static let remove = Action(rawValue: "remove")
        public static let leave = Action(rawValue: "leave")
        public static let setRole = Action(rawValue: "setRole")
        public static let transferOwnership = Action(rawValue: "transferOwnership")
        public static let dismiss = Action(rawValue: "dismiss")
        /// Change the group's profile (`profile`): owner and admins (NIM `updateTeamInfos:teamId:completion:`,
        /// Agora `updateGroupSubject:forGroup:completion:` / `updateGroupExtWithId:extension:completion:`, RongCloud's
        /// server `group/refresh`).
        public static let setProfile = Action(rawValue: "setProfile")
    }
    public let conversation: ConversationID
    public let clientID: ClientMessageID
    public let action: Action
    public let accounts: [AccountID]?
    public let role: MemberRole?
    /// For `setProfile`: the fields to set.
    public let profile: GroupProfile?
    public init(
        conversation: ConversationID,
        clientID: ClientMessageID,
        action: Action,
        accounts: [AccountID]? = nil,
        role: MemberRole? = nil,
        profile: GroupProfile? = nil
    ) {
        self.conversation = conversation
        self.clientID = clientID
        self.action = action
        self.accounts = accounts
        self.role = role
        self.profile = profile
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case clientID = "clientId"
        case action, accounts, role, profile
    }
}

/// `groupMembers`: one page of a group's members, in account order.
public struct GroupMembersRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    /// The `nextCursor` of the previous page.
    public let cursor: String?
    /// At most 100 (the default).
    public let limit: Int?
    public init(conversation: ConversationID, cursor: String? = nil, limit: Int? = nil) {
        self.conversation = conversation
        self.cursor = cursor
        self.limit = limit
    }
}

/// One member of a group.
public struct GroupMember: Hashable, Sendable, Codable {
    public let account: AccountID
    public let role: MemberRole
    public let joinedSeq: Seq
    /// The member's profile (ADR 0053), when it ever set one: a member list shows names, not ids.
    public let profile: AccountProfile?
    public init(account: AccountID, role: MemberRole, joinedSeq: Seq, profile: AccountProfile? = nil) {
        self.account = account
        self.role = role
        self.joinedSeq = joinedSeq
        self.profile = profile
    }

    /// This member with its profile.
    public func with(_ profile: AccountProfile?) -> GroupMember {
        GroupMember(account: account, role: role, joinedSeq: joinedSeq, profile: profile)
    }
}

/// The `groupMembers` ack.
public struct GroupMembersAck: Hashable, Sendable, Codable {
    public let members: [GroupMember]
    public let total: Int
    /// Pass it to get the next page; absent on the last page.
    public let nextCursor: String?
    public init(members: [GroupMember], total: Int, nextCursor: String?) {
        self.members = members
        self.total = total
        self.nextCursor = nextCursor
    }
}

/// `requestReadReceipts`: the sender of a group message asks its audience for read receipts after sending it
/// (RongCloud `sendReadReceiptRequest`). Members learn of it through a log entry (`WireMessage.receiptRequest`).
public struct RequestReadReceiptsRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    public let clientID: ClientMessageID
    public init(conversation: ConversationID, messageID: MessageID, clientID: ClientMessageID) {
        self.conversation = conversation
        self.messageID = messageID
        self.clientID = clientID
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case clientID = "clientId"
    }
}

/// `receiptCounts`: read and unread counts of 1–100 messages of one group that asked for read receipts (NIM
/// `refreshTeamMessageReceipts`).
public struct ReceiptCountsRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageIDs: [MessageID]
    public init(conversation: ConversationID, messageIDs: [MessageID]) {
        self.conversation = conversation
        self.messageIDs = messageIDs
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case messageIDs = "messageIds"
    }
}

/// How many of a group message's audience have read it. The audience is the group's membership when it was sent,
/// minus the sender; members who left without reading drop out of it, readers who left stay readers.
public struct ReceiptCount: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let readCount: Int
    public let unreadCount: Int
    /// `true` when the message was recalled: its receipts no longer matter and the counts are zero.
    public let recalled: Bool?
    public init(messageID: MessageID, readCount: Int, unreadCount: Int, recalled: Bool? = nil) {
        self.messageID = messageID
        self.readCount = readCount
        self.unreadCount = unreadCount
        self.recalled = recalled
    }
    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case readCount, unreadCount, recalled
    }
}

/// The `receiptCounts` ack, in the order asked.
public struct ReceiptCountsAck: Hashable, Sendable, Codable {
    public let counts: [ReceiptCount]
    public init(counts: [ReceiptCount]) { self.counts = counts }
}

/// Which list of a message's audience.
public struct ReceiptListKind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    /// Who read it, with read times (and the ack's `content`, if any).
    public static let read = ReceiptListKind(rawValue: "read")
    /// Who has not read it yet (current members only).
    public static let unread = ReceiptListKind(rawValue: "unread")
    /// Who received it on a device, with delivery times.
    public static let delivered = ReceiptListKind(rawValue: "delivered")
}

/// `receiptList`: one page of a group message's read, unread or delivered list (NIM `queryMessageReceiptDetail`,
/// Agora `asyncFetchGroupMessageAcksFromServer`).
public struct ReceiptListRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    public let list: ReceiptListKind
    /// Only these accounts (1–100; NIM `accountSet`); the page and total are then among them.
    public let accounts: [AccountID]?
    /// The `nextCursor` of the previous page.
    public let cursor: String?
    /// At most 100 (the default).
    public let limit: Int?
    public init(
        conversation: ConversationID,
        messageID: MessageID,
        list: ReceiptListKind,
        accounts: [AccountID]? = nil,
        cursor: String? = nil,
        limit: Int? = nil
    ) {
        self.conversation = conversation
        self.messageID = messageID
        self.list = list
        self.accounts = accounts
        self.cursor = cursor
        self.limit = limit
    }
    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case list, accounts, cursor, limit
    }
}

/// One entry of a receipt list.
public struct ReceiptListEntry: Hashable, Sendable, Codable {
    public let account: AccountID
    /// When it was read or delivered (absent in unread lists).
    public let time: Timestamp?
    /// The short `content` the member sent with its ack (Agora), if any.
    public let content: String?
    public init(account: AccountID, time: Timestamp? = nil, content: String? = nil) {
        self.account = account
        self.time = time
        self.content = content
    }
}

/// The `receiptList` ack.
public struct ReceiptListAck: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let list: ReceiptListKind
    public let entries: [ReceiptListEntry]
    /// The size of the whole list (among `accounts` when filtered).
    public let total: Int
    /// Pass it to get the next page; absent on the last page.
    public let nextCursor: String?
    public let recalled: Bool?
    public init(
        messageID: MessageID,
        list: ReceiptListKind,
        entries: [ReceiptListEntry],
        total: Int,
        nextCursor: String?,
        recalled: Bool? = nil
    ) {
        self.messageID = messageID
        self.list = list
        self.entries = entries
        self.total = total
        self.nextCursor = nextCursor
        self.recalled = recalled
    }
    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case list, entries, total, nextCursor, recalled
    }
}

/// New readers of one group message and its counts after them.
public struct GroupReceiptUpdate: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let seq: Seq
    /// `{account: readTime}` (RongCloud `onMessageReceiptResponse`).
    public let readers: [AccountID: Timestamp]
    /// The short content the readers sent with their acks (Agora), if any.
    public let contents: [AccountID: String]?
    public let readCount: Int
    public let unreadCount: Int
    public init(
        messageID: MessageID,
        seq: Seq,
        readers: [AccountID: Timestamp],
        contents: [AccountID: String]? = nil,
        readCount: Int,
        unreadCount: Int
    ) {
        self.messageID = messageID
        self.seq = seq
        self.readers = readers
        self.contents = contents
        self.readCount = readCount
        self.unreadCount = unreadCount
    }
    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case seq, readers, contents, readCount, unreadCount
    }
}

/// `groupReceipts` event, to the devices of the sender of group messages that asked for read receipts: members
/// read them (Agora `groupMessageDidRead`, RongCloud `onMessageReceiptResponse`). Counts only grow.
public struct GroupReceiptsEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let updates: [GroupReceiptUpdate]
    public init(conversation: ConversationID, updates: [GroupReceiptUpdate]) {
        self.conversation = conversation
        self.updates = updates
    }
}
