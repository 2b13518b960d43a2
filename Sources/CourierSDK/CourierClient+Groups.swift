// Courier — Apache-2.0
internal import Foundation
public import CourierWire

extension CourierClient {
    // MARK: Membership

    /// Creates a group with you as its owner (NIM `createTeam`, Agora `createGroup`, RongCloud: your backend).
    ///
    /// Its conversation is `ConversationID.group(_:)`. Membership changes are entries of the group's log: every
    /// member's devices receive them as messages of kind ``Message/Kind/groupChange``.
    ///
    /// - Parameters:
    ///   - group: The group's id, chosen by you or your backend (1–128 of `[A-Za-z0-9._@-]`).
    ///   - members: The first members besides you, at most the server's `maxGroupChangeAccounts` (1,000 by default);
    ///     add more with ``addMembers(_:to:)``.
    /// - Returns: The `created` entry.
    /// - Throws: ``CourierError/groupRefused(code:message:)`` with `group.alreadyExists` or `group.tooManyAccounts`;
    ///   ``CourierError/accountNotFound(_:)``; ``CourierError/notConnected``.
    @discardableResult
    public func createGroup(_ group: GroupID, members: [AccountID]) async throws -> Message {
        let request = CreateGroupRequest(group: group, clientID: Self.newClientID(), members: members)
        return try await groupEntry(in: .group(group)) { .createGroup($0, request) }
    }

    /// Adds members (owner and admins; NIM `addUsers`, Agora `addMembers`). They see the group's log from this entry on.
    @discardableResult
    public func addMembers(_ accounts: [AccountID], to group: ConversationID) async throws -> Message {
        try await changeGroup(group, .add, accounts: accounts)
    }

    /// Removes members (owner: anyone else; admins: ordinary members; NIM `kickUsers`, Agora `removeMembers`). Messages
    /// they had not read drop them from their unread lists; what they read stays read.
    @discardableResult
    public func removeMembers(_ accounts: [AccountID], from group: ConversationID) async throws -> Message {
        try await changeGroup(group, .remove, accounts: accounts)
    }

    /// Leaves a group (NIM `quitTeam`, Agora `leaveGroup`). The owner transfers ownership first
    /// (`group.ownerCannotLeave`).
    @discardableResult
    public func leaveGroup(_ group: ConversationID) async throws -> Message {
        try await changeGroup(group, .leave)
    }

    /// Makes members admins or ordinary members (owner only; NIM `addManagersToTeam` / `removeManagersFromTeam`).
    @discardableResult
    public func setRole(_ role: MemberRole, for accounts: [AccountID], in group: ConversationID) async throws -> Message
    {
        try await changeGroup(group, .setRole, accounts: accounts, role: role)
    }

    /// Hands the group to another member (owner only; NIM `transferManagerWithTeam`); you become an ordinary member.
    @discardableResult
    public func transferOwnership(of group: ConversationID, to account: AccountID) async throws -> Message {
        try await changeGroup(group, .transferOwnership, accounts: [account])
    }

    /// Dismisses the group (owner only; NIM `dismissTeam`, Agora `destroyGroup`, RongCloud: your backend's
    /// `group/dismiss`).
    ///
    /// Every member's connected devices receive the returned entry, of action `dismissed` (`groupChange?.action`), as
    /// the group's last message; every membership ends with it. The group is then gone: requests that name it fail
    /// with `group.notFound` (which is how a device that was offline learns of it), and its id is not given out again.
    /// What your devices hold of it stays in their cache.
    ///
    /// - Throws: ``CourierError/groupRefused(code:message:)`` with `group.notPermitted` if you are not the owner.
    @discardableResult
    public func dismissGroup(_ group: ConversationID) async throws -> Message {
        try await changeGroup(group, .dismiss)
    }

    /// Changes the group's profile (owner and admins): the fields given are set, an empty text clears its field, the
    /// others stay. Every member's devices get it in order, as a `profileChanged` entry of the log (live, or when they
    /// sync), and ``Conversation/groupProfile`` shows it.
    ///
    /// NIM `updateTeamInfos:teamId:completion:` (name, avatar, announcement, custom info), Agora
    /// `updateGroupSubject:forGroup:completion:` / `updateGroupExtWithId:extension:completion:` /
    /// `updateGroupAnnouncementWithId:announcement:completion:`, RongCloud: your backend's
    /// `group/refresh`.
    ///
    /// - Throws: ``CourierError/groupRefused(code:message:)`` with `group.notPermitted` for an ordinary member;
    ///   ``CourierError/invalidInput(code:message:)`` for a name past 100 characters, an announcement past 4,096
    ///   bytes, an avatar address past 2,048 bytes or an `ext` past a message's limits.
    @discardableResult
    public func setGroupProfile(_ profile: GroupProfile, in group: ConversationID) async throws -> Message {
        try await changeGroup(group, .setProfile, profile: profile)
    }

    /// One page of a group's members, in account order, with the member count (NIM `fetchTeamMembers`).
    ///
    /// - Parameters:
    ///   - group: The group's conversation.
    ///   - cursor: The previous page's `nextCursor`.
    ///   - limit: 1–100.
    public func members(
        of group: ConversationID,
        cursor: String? = nil,
        limit: Int = 100
    ) async throws
        -> GroupMemberPage
    {
        let request = GroupMembersRequest(conversation: group, cursor: cursor, limit: limit)
        switch try await requestAck(about: group, { .groupMembers($0, request) }) {
        case .groupMembers(let ack): return GroupMemberPage(members: ack.members, total: ack.total, nextCursor: ack.nextCursor)
        default: throw CourierError.unexpectedReply
        }
    }

    // MARK: Group read receipts

    /// Asks the group's members for read receipts of a message you sent without (RongCloud
    /// `sendReadReceiptRequest`). Members get ``CourierEvent/readReceiptsRequested(_:)``; the counts start from the
    /// audience of the message (the members when it was sent) and those of them who already read it.
    ///
    /// - Throws: ``CourierError/groupRefused(code:message:)`` with `receipt.notPermitted` (not your message, or the
    ///   server lets only owners and admins ask), `receipt.groupTooLarge`, `receipt.alreadyRequested`.
    public func requestReadReceipts(for message: MessageID, in group: ConversationID) async throws {
        let request = RequestReadReceiptsRequest(conversation: group, messageID: message, clientID: Self.newClientID())
        try await logEntry(in: group) { .requestReadReceipts($0, request) }
    }

    /// Read and unread counts of up to 100 of a group's messages that asked for receipts, from the server (NIM
    /// `refreshTeamMessageReceipts`). The local copies are updated; ``localReadReceiptCounts(for:)`` answers offline.
    ///
    /// - Throws: ``CourierError/groupRefused(code:message:)`` with `receipt.notRequested`;
    ///   ``CourierError/notAMember(_:)``.
    public func readReceiptCounts(for messages: [MessageID], in group: ConversationID) async throws -> [ReceiptCount] {
        let request = ReceiptCountsRequest(conversation: group, messageIDs: messages)
        switch try await requestAck(about: group, { .receiptCounts($0, request) }) {
        case .receiptCounts(let ack):
            try await store.store(ack.counts)
            return ack.counts
        default: throw CourierError.unexpectedReply
        }
    }

    /// One page of a group message's read list (with read times and ack contents), unread list or delivered list
    /// (with delivery times), from the server: NIM `queryMessageReceiptDetail`, Agora
    /// `asyncFetchGroupMessageAcksFromServer`.
    ///
    /// - Parameters:
    ///   - message: A message of the group that asked for read receipts.
    ///   - group: The group's conversation.
    ///   - list: `.read`, `.unread` or `.delivered`.
    ///   - accounts: Only these accounts (1–100; NIM `accountSet`).
    ///   - cursor: The previous page's `nextCursor`.
    ///   - limit: 1–100.
    /// - Returns: The page and the list's total (``ReadReceiptList/isRecalled`` for a recalled message).
    public func readReceiptList(
        for message: MessageID,
        in group: ConversationID,
        list: ReceiptListKind = .read,
        accounts: [AccountID]? = nil,
        cursor: String? = nil,
        limit: Int = 100
    ) async throws -> ReadReceiptList {
        let request = ReceiptListRequest(
            conversation: group,
            messageID: message,
            list: list,
            accounts: accounts,
            cursor: cursor,
            limit: limit
        )
        switch try await requestAck(about: group, { .receiptList($0, request) }) {
        case .receiptList(let ack):
            // Readers fetched are kept too: ``localReaders(of:)`` answers with them offline.
            if list == .read, ack.recalled != true, !ack.entries.isEmpty {
                try await store.storeReaders(ack.entries, of: message)
            }
            return ReadReceiptList(
                messageID: ack.messageID,
                list: ack.list,
                entries: ack.entries,
                total: ack.total,
                nextCursor: ack.nextCursor,
                isRecalled: ack.recalled == true
            )
        default: throw CourierError.unexpectedReply
        }
    }

    /// The receipt counts this device last heard for your group messages (from events and queries): works offline,
    /// may be stale (NIM `teamReceiptInfo`). Messages without known counts are left out.
    public func localReadReceiptCounts(for messages: [MessageID]) async throws -> [ReceiptCount] {
        try await self.messages(messages).compactMap(\.readReceiptCount)
    }

    /// The readers of your group message this device knows of, with read times (NIM `localMessageReceiptDetail:`):
    /// those heard through ``CourierEvent/groupReadReceiptsChanged(_:)`` and those of the read lists fetched with
    /// ``readReceiptList(for:in:list:accounts:cursor:limit:)``. Works offline; may be incomplete (the server has the
    /// whole list). There is no local unread list: members come and go, so ask the server.
    public func localReaders(of message: MessageID) async throws -> [AccountID: Timestamp] {
        try await store.readers(of: message)
    }

    // MARK: Helpers

    static func newClientID() -> ClientMessageID { ClientMessageID(rawValue: UUID().uuidString.lowercased()) }

    private func changeGroup(
        _ group: ConversationID,
        _ action: GroupChangeRequest.Action,
        accounts: [AccountID]? = nil,
        role: MemberRole? = nil,
        profile: GroupProfile? = nil
    ) async throws -> Message {
        let request = GroupChangeRequest(
            conversation: group,
            clientID: Self.newClientID(),
            action: action,
            accounts: accounts,
            role: role,
            profile: profile
        )
        return try await groupEntry(in: group) { .groupChange($0, request) }
    }

    /// Sends a request answered with a membership entry, stores the entry, and returns it.
    private func groupEntry(
        in group: ConversationID,
        _ frame: @escaping @Sendable (RequestID) -> ClientFrame
    )
        async throws -> Message
    {
        let entry = try await logEntry(in: group, frame)
        guard let message = try await store.message(entry.id, me: try boundAccount()) else {
            throw CourierError.localStore("The entry \(entry.id) was not stored.")
        }
        return message
    }

    /// Sends a request answered with a log entry and stores the entry.
    @discardableResult
    private func logEntry(
        in group: ConversationID,
        _ frame: @escaping @Sendable (RequestID) -> ClientFrame
    )
        async throws -> WireMessage
    {
        let me = try boundAccount()
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        let entry: WireMessage
        switch try await link.request(frame).ack(about: group) {
        case .createGroup(let ack), .groupChange(let ack), .requestReadReceipts(let ack): entry = ack.message
        default: throw CourierError.unexpectedReply
        }
        try await store.apply([entry], arrival: .online, me: me, then: publisher(for: link))
        return entry
    }
}
