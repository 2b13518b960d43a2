// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation

/// Groups and group read receipts (SPEC §5). Membership changes are log entries: every member's devices see them
/// as messages, and each records the group's new membership version (ADR 0023).
package struct GroupService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let limits: CourierServerConfiguration.Limits
    let receipts: CourierServerConfiguration.GroupReceipts
    let now: @Sendable () -> Timestamp
    /// Most entries in one receipt list or member page.
    static let maxPageSize = 100

    package func create(
        _ request: CreateGroupRequest,
        from device: DeviceContext
    ) async throws(RequestError)
        -> ServiceResult<SendAck>
    {
        guard request.group.isValid else {
            throw RequestError(.invalidArgument, "group must be 1–128 characters of [A-Za-z0-9._@-].")
        }
        try validate(request.clientID, request.members)
        let conversation = ConversationID.group(request.group)
        let members = Array(Set(request.members).subtracting([device.account])).sorted()
        let entry = draft(
            conversation,
            request.clientID,
            device.account,
            WireGroupChange(action: .created, accounts: members)
        )
        let result: AppendOutcome
        do { result = try await store.createGroup(entry, members: members) } catch { throw RequestError(error) }
        return try await access.published(result, excluding: device.connection)
    }

    package func change(
        _ request: GroupChangeRequest,
        from device: DeviceContext
    ) async throws(RequestError)
        -> ServiceResult<SendAck>
    {
        do {
            try await access.check(device.account, in: request.conversation)
        } catch let error where error.code == .groupNotFound && request.action == .dismiss {
            // A retry of a dismissal that was applied: the store answers its entry (idempotent on clientId), or
            // `group.notFound` when there was none.
        }
        let accounts = Array(Set(request.accounts ?? [])).sorted()
        try validate(request.clientID, accounts)
        let change: WireGroupChange
        switch request.action {
        case .add, .remove:
            guard !accounts.isEmpty else { throw RequestError(.invalidArgument, "Name 1 or more accounts.") }
            change = WireGroupChange(action: request.action == .add ? .added : .removed, accounts: accounts)
        case .leave:
            change = WireGroupChange(action: .left, accounts: [device.account])
        case .setRole:
            guard !accounts.isEmpty, let role = request.role, role != .owner else {
                throw RequestError(.invalidArgument, "setRole names accounts and a role: admin or member.")
            }
            change = WireGroupChange(action: .roleChanged, accounts: accounts, role: role)
        case .transferOwnership:
            guard accounts.count == 1 else {
                throw RequestError(.invalidArgument, "transferOwnership names exactly one member.")
            }
            change = WireGroupChange(action: .ownerTransferred, accounts: accounts)
        case .dismiss:
            guard accounts.isEmpty else { throw RequestError(.invalidArgument, "dismiss names no accounts.") }
            change = WireGroupChange(action: .dismissed, accounts: [])
        case .setProfile:
            guard accounts.isEmpty, let profile = request.profile else {
                throw RequestError(.invalidArgument, "setProfile names a profile and no accounts.")
            }
            if let invalidity = profile.invalidity { throw RequestError(.invalidArgument, invalidity) }
            change = WireGroupChange(action: .profileChanged, accounts: [], profile: profile)
        default:
            throw RequestError(
                .invalidArgument,
                "action must be add, remove, leave, setRole, transferOwnership, dismiss or setProfile."
            )
        }
        let result = try await storing { () throws(StorageError) in
            try await store.changeGroup(draft(request.conversation, request.clientID, device.account, change))
        }
        // Everyone who was a member sees the change (those removed included), and so do those added.
        return try await access.published(result, excluding: device.connection)
    }

    /// The app's backend dismisses a group in its owner's name (NIM `team/remove`): the same entry as the owner's own
    /// `dismiss`, which every member's devices receive.
    package func dismissForApp(
        _ group: ConversationID,
        clientID: ClientMessageID
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        try await access.requireGroup(group)
        let owner = try await storing { () throws(StorageError) in try await store.owner(of: group) }
        guard let owner else { throw ConversationAccess.groupNotFound(group) }
        let request = GroupChangeRequest(conversation: group, clientID: clientID, action: .dismiss)
        return try await change(request, from: .app(acting: owner))
    }

    /// A page of members, for a member (`caller`) or for the app's backend (`nil`: any group).
    package func members(
        _ request: GroupMembersRequest,
        caller: AccountID?
    ) async throws(RequestError)
        -> GroupMembersAck
    {
        try await checkCaller(caller, in: request.conversation)
        let limit = try pageSize(request.limit)
        var after: AccountID?
        if let cursor = request.cursor {
            after = AccountID(rawValue: cursor)
            guard after?.isValid == true else { throw RequestError(.invalidArgument, "cursor is not valid.") }
        }
        return try await storing { () throws(StorageError) in
            let page = try await store.members(of: request.conversation, after: after, limit: limit + 1)
            var members = Array(page.members.prefix(limit))
            let next = page.members.count > limit ? members.last?.account.rawValue : nil
            // The page's profiles in one read (ADR 0053): those ever set.
            var profiles: [AccountID: AccountProfile] = [:]
            for profile in try await store.accountProfiles(of: members.map(\.account)) where profile.version > 0 {
                profiles[profile.account] = profile
            }
            members = members.map { $0.with(profiles[$0.account]) }
            return GroupMembersAck(members: members, total: page.total, nextCursor: next)
        }
    }

    /// The sender asks for read receipts after sending (RongCloud `sendReadReceiptRequest`).
    package func requestReadReceipts(
        _ request: RequestReadReceiptsRequest,
        from device: DeviceContext
    )
        async throws(RequestError) -> ServiceResult<SendAck>
    {
        try await access.check(device.account, in: request.conversation)
        guard request.conversation.kind == .group else {
            throw RequestError(.conversationInvalid, "Read receipts are asked for in groups.")
        }
        guard request.clientID.isValid else {
            throw RequestError(.invalidArgument, "clientId must be 1–128 characters of [A-Za-z0-9._@:-].")
        }
        let target = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        guard target.isChatMessage, !target.isRecalled else {
            throw RequestError(.messageNotFound, "'\(target.id)' is recalled or not a chat message.")
        }
        guard target.sender == device.account else {
            throw RequestError(.receiptNotPermitted, "Only the sender may ask for read receipts afterwards.")
        }
        try await receipts.checkAsking(in: request.conversation, by: device.account, access: access)
        let entry = MessageDraft(
            id: MessageID(rawValue: .randomUUID()),
            conversation: request.conversation,
            clientID: request.clientID,
            sender: device.account,
            time: now(),
            body: "",
            receiptRequest: target.id
        )
        let result: AppendOutcome
        do {
            result = try await store.requestReadReceipts(entry)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        return try await access.published(result, excluding: device.connection)
    }

    /// Receipt counts, for a member (`caller`) or for the app's backend (`nil`).
    package func counts(
        _ request: ReceiptCountsRequest,
        caller: AccountID?
    ) async throws(RequestError)
        -> ReceiptCountsAck
    {
        try await checkCaller(caller, in: request.conversation)
        guard (1...Self.maxPageSize).contains(request.messageIDs.count) else {
            throw RequestError(.invalidArgument, "messageIds must name 1–\(Self.maxPageSize) messages.")
        }
        var messages: [WireMessage] = []
        for id in request.messageIDs {
            messages.append(try await MessageLookup.message(id, in: request.conversation, store: store))
        }
        let tallies = try await storing { () throws(StorageError) in
            try await store.receiptCounts(in: request.conversation, seqs: messages.map(\.seq))
        }
        var counts: [ReceiptCount] = []
        for message in messages {
            if message.isRecalled {
                counts.append(ReceiptCount(messageID: message.id, readCount: 0, unreadCount: 0, recalled: true))
                continue
            }
            guard let tally = tallies[message.seq] else {
                throw RequestError(.receiptNotRequested, "Message '\(message.id)' did not ask for read receipts.")
            }
            counts.append(
                ReceiptCount(messageID: message.id, readCount: tally.readCount, unreadCount: tally.unreadCount)
            )
        }
        return ReceiptCountsAck(counts: counts)
    }

    /// A page of a receipt list, for a member (`caller`) or for the app's backend (`nil`).
    package func list(
        _ request: ReceiptListRequest,
        caller: AccountID?
    ) async throws(RequestError)
        -> ReceiptListAck
    {
        try await checkCaller(caller, in: request.conversation)
        let limit = try pageSize(request.limit)
        guard [.read, .unread, .delivered].contains(request.list) else {
            throw RequestError(.invalidArgument, "list must be read, unread or delivered.")
        }
        if let accounts = request.accounts {
            guard (1...Self.maxPageSize).contains(accounts.count), accounts.allSatisfy(\.isValid) else {
                throw RequestError(.invalidArgument, "accounts must name 1–\(Self.maxPageSize) valid accounts.")
            }
        }
        let message = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        if message.isRecalled {
            return ReceiptListAck(
                messageID: message.id,
                list: request.list,
                entries: [],
                total: 0,
                nextCursor: nil,
                recalled: true
            )
        }
        guard message.needsReadReceipt == true else {
            throw RequestError(.receiptNotRequested, "Message '\(message.id)' did not ask for read receipts.")
        }
        var query = ReceiptListQuery(
            group: request.conversation,
            seq: message.seq,
            sender: message.sender,
            list: request.list,
            accounts: request.accounts,
            cursor: nil,
            limit: limit
        )
        if let text = request.cursor {
            // A cursor pages the list it came from: one of another message or list is refused, not restarted.
            guard let cursor = ReceiptCursor(text: text, for: query) else {
                throw RequestError(
                    .invalidArgument,
                    "cursor is not one this list handed out (a cursor pages one message's list, with the same filter)."
                )
            }
            query = query.with(cursor: cursor)
        }
        return try await storing { () throws(StorageError) in
            let page = try await store.receiptList(query)
            return ReceiptListAck(
                messageID: message.id,
                list: request.list,
                entries: page.entries,
                total: page.total,
                nextCursor: page.next?.text(for: query)
            )
        }
    }

    // MARK: Helpers

    /// A member asks about its own group; the app's backend (`nil`) about any group that exists.
    private func checkCaller(_ caller: AccountID?, in group: ConversationID) async throws(RequestError) {
        if let caller {
            _ = try await access.member(of: group, caller: caller)
        } else {
            try await access.requireGroup(group)
        }
    }

    private func validate(_ clientID: ClientMessageID, _ accounts: [AccountID]) throws(RequestError) {
        guard clientID.isValid else {
            throw RequestError(.invalidArgument, "clientId must be 1–128 characters of [A-Za-z0-9._@:-].")
        }
        guard accounts.count <= limits.maxGroupChangeAccounts else {
            throw RequestError(
                .groupTooManyAccounts,
                "At most \(limits.maxGroupChangeAccounts) accounts per request; add more in further requests."
            )
        }
        if let bad = accounts.first(where: { !$0.isValid }) {
            throw RequestError(.invalidArgument, "'\(bad.rawValue.prefix(200))' is not a valid account id.")
        }
    }

    private func pageSize(_ limit: Int?) throws(RequestError) -> Int {
        let limit = limit ?? Self.maxPageSize
        guard (1...Self.maxPageSize).contains(limit) else {
            throw RequestError(.invalidArgument, "limit must be 1–\(Self.maxPageSize).")
        }
        return limit
    }

    private func draft(
        _ conversation: ConversationID,
        _ clientID: ClientMessageID,
        _ sender: AccountID,
        _ change: WireGroupChange
    ) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: .randomUUID()),
            conversation: conversation,
            clientID: clientID,
            sender: sender,
            time: now(),
            body: "",
            group: change
        )
    }

}

extension CourierServerConfiguration.GroupReceipts {
    /// Whether `account` may ask `group` for read receipts under the server's policy.
    package func checkAsking(
        in group: ConversationID,
        by account: AccountID,
        access: ConversationAccess
    ) async throws(RequestError) {
        if requesters == .ownerAndAdmins {
            let member = try await access.member(of: group, caller: account)
            guard member.role != .member else {
                throw RequestError(.receiptNotPermitted, "Only the owner and admins may ask for read receipts here.")
            }
        }
        if let maxGroupSize {
            let size = try await storing { () throws(StorageError) in
                try await access.store.members(of: group, after: nil, limit: 1).total
            }
            guard size <= maxGroupSize else {
                throw RequestError(
                    .receiptGroupTooLarge,
                    "Read receipts may be asked in groups of up to \(maxGroupSize) members."
                )
            }
        }
    }
}
