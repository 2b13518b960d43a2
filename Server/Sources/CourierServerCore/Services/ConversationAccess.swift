// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// Who may use a conversation, and whose devices its entries go to. Both come from what is committed (ADR 0023): a
/// caller's membership of a group is read from the store, and an entry's audience is the membership at the version
/// the entry was appended under — read in the appending transaction — so every node agrees on both the moment a
/// change is acknowledged, whatever it cached.
package struct ConversationAccess: Sendable {
    let store: any CourierStore
    let groups: GroupDirectory

    /// Checks that `caller` is a member of `conversation` now; in a group, returns its membership.
    ///
    /// - Throws: `conversation.invalid` for a malformed id, `group.notFound` (also for a dismissed group),
    ///   `conversation.notAMember` when the caller is not (or no longer) in it.
    @discardableResult
    package func check(
        _ caller: AccountID,
        in conversation: ConversationID) async throws(RequestError
    ) -> GroupMember? {
        if let (first, second) = conversation.directMembers {
            guard caller == first || caller == second else { throw Self.notAMember(conversation) }
            return nil
        }
        guard conversation.groupID != nil else { throw Self.invalid(conversation) }
        return try await member(of: conversation, caller: caller)
    }

    /// The caller's membership of a group, read from the store.
    ///
    /// - Throws: as ``check(_:in:)``, and `conversation.invalid` for a direct conversation.
    func member(of group: ConversationID, caller: AccountID) async throws(RequestError) -> GroupMember {
        guard group.groupID != nil else {
            // A direct conversation's outsider hears that first; a malformed id that it is malformed.
            try await check(caller, in: group)
            throw RequestError(.conversationInvalid, "'\(group)' is not a group.")
        }
        let member = try await storing { () throws(StorageError) in try await store.member(caller, of: group) }
        guard let member else {
            try await requireGroup(group)  // group.notFound first
            throw Self.notAMember(group)
        }
        return member
    }

    /// Checks that `group` names a group that exists and was not dismissed.
    ///
    /// - Throws: `conversation.invalid`, `group.notFound`.
    func requireGroup(_ group: ConversationID) async throws(RequestError) {
        guard group.groupID != nil else { throw Self.invalid(group) }
        let exists = try await storing { () throws(StorageError) in try await store.groupExists(group) }
        guard exists else { throw Self.groupNotFound(group) }
    }

    /// Checks that `conversation` names a direct conversation between registered accounts, or a group that exists.
    ///
    /// - Throws: `account.notFound` for a direct conversation with an account never registered; `conversation.invalid`,
    ///   `group.notFound`.
    package func requireConversation(_ conversation: ConversationID) async throws(RequestError) {
        guard let members = conversation.directMembers else { return try await requireGroup(conversation) }
        for account in [members.0, members.1] {
            let exists = try await storing { () throws(StorageError) in try await store.accountExists(account) }
            guard exists else { throw RequestError(.accountNotFound, "Account '\(account)' does not exist.") }
        }
    }

    /// What a write into a group refused for its sender means, the group having been checked before the write: a
    /// dismissal that committed in between answers `group.notFound`, like every later request.
    func refusal(_ error: StorageError, in conversation: ConversationID) async -> RequestError {
        let refusedInGroup = error == .groupRefused(.actorNotAMember) || error == .conversationNotFound(conversation)
        if conversation.kind == .group, refusedInGroup, (try? await store.groupExists(conversation)) == false {
            return Self.groupNotFound(conversation)
        }
        return RequestError(error)
    }

    /// The publications of the change one write made (none when it made none).
    func publications(of change: Change?, excluding connection: ConnectionID?) async throws(RequestError)
        -> [Publication]
    {
        try await publications(of: change.map { [$0] } ?? [], excluding: connection)
    }

    /// The publications of `changes` (``Change/events(of:)``), their audiences read: a group entry's members at the
    /// version it was appended under, whatever this node cached. `connection`, the requester's, already has the
    /// result in its ack.
    func publications(of changes: [Change], excluding connection: ConnectionID?) async throws(RequestError)
        -> [Publication]
    {
        var publications: [Publication] = []
        for derived in Change.events(of: changes) {
            let recipients: [AccountID]
            switch derived.audience {
            case .members(let group, let version, let entry, let named):
                // The set the directory keeps: the bus asks it for the accounts connected here (``Publication/members``).
                let members = try await storing { () throws(StorageError) in
                    try await groups.members(of: group, version: version, before: entry, store: store)
                }
                publications.append(
                    Publication(event: derived.event, recipients: named, members: members.set, excluded: connection)
                )
                continue
            case .accounts(let accounts):
                recipients = accounts
            case .contacts(let account):
                do { recipients = Array(Set(try await store.contacts(of: account) + [account])) } catch {
                    throw RequestError(error)
                }
            }
            publications.append(Publication(event: derived.event, recipients: recipients, excluded: connection))
        }
        return publications
    }

    /// The ack of an append, and the publications of the change it made (none for a duplicate).
    func published(
        _ result: AppendOutcome,
        excluding connection: ConnectionID?
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        let ack = SendAck(message: result.message, duplicate: result.isDuplicate)
        return ServiceResult(
            ack: ack,
            publications: try await publications(of: result.change, excluding: connection)
        )
    }

    /// Who sees a typing indicator (ADR 0050): the other member of a direct conversation; in a group, the members at
    /// membership `version` as the store just said (the list cached by version, read when not cached), but the typist.
    func typingAudience(of event: TypingEvent, membershipVersion version: Seq?) async throws(RequestError)
        -> [AccountID]
    {
        if let (first, second) = event.conversation.directMembers {
            return [first, second].filter { $0 != event.account }
        }
        guard let version else { return [] }
        // The members before an entry past every seq: the membership now.
        let members = try await storing { () throws(StorageError) in
            try await groups.members(of: event.conversation, version: version, before: Seq(.max), store: store)
        }
        return members.accounts.filter { $0 != event.account }
    }

    /// The first of `accounts` that is not a member of `conversation` now, read from the store (one primary-key read
    /// each in a group).
    ///
    /// - Throws: `conversation.invalid`, `group.notFound`.
    func firstOutsider(among accounts: [AccountID], in conversation: ConversationID) async throws(RequestError)
        -> AccountID?
    {
        if let (first, second) = conversation.directMembers {
            return accounts.first { $0 != first && $0 != second }
        }
        try await requireGroup(conversation)
        return try await storing { () throws(StorageError) in
            for account in accounts where try await store.member(account, of: conversation) == nil { return account }
            return nil
        }
    }

    package static func invalid(_ conversation: ConversationID) -> RequestError {
        RequestError(
            .conversationInvalid,
            "'\(conversation.rawValue.prefix(300))' is not a conversation id (d:ACCOUNT:ACCOUNT sorted, or g:GROUP)."
        )
    }

    static func groupNotFound(_ group: ConversationID) -> RequestError {
        RequestError(.groupNotFound, "No group is named '\(group.rawValue.prefix(300))'.")
    }

    static func notAMember(_ conversation: ConversationID) -> RequestError {
        RequestError(.conversationNotAMember, "You are not a member of conversation '\(conversation)'.")
    }
}
