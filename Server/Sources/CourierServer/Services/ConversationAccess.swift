// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire

/// Who may use a conversation, and whose devices its events go to.
struct ConversationAccess: Sendable {
    let store: any CourierStore
    let groups: GroupDirectory

    /// The members of `conversation` if `caller` is one of them.
    ///
    /// - Throws: `conversation.invalid` for a malformed id, `group.notFound`, `conversation.notAMember` when the
    ///   caller is not (or no longer) in it.
    func members(of conversation: ConversationID, caller: AccountID) async throws(RequestError) -> [AccountID] {
        let members = try await self.members(of: conversation)
        guard members.contains(caller) else {
            throw RequestError(.conversationNotAMember, "You are not a member of conversation '\(conversation)'.")
        }
        return members.accounts
    }

    /// Everyone in `conversation`.
    func members(of conversation: ConversationID) async throws(RequestError) -> GroupDirectory.Members {
        if let (first, second) = conversation.directMembers {
            return GroupDirectory.Members(accounts: [first, second])
        }
        guard conversation.groupID != nil else {
            throw RequestError(
                .conversationInvalid,
                "'\(conversation.rawValue.prefix(300))' is not a conversation id (d:ACCOUNT:ACCOUNT sorted, or g:GROUP)."
            )
        }
        if let cached = groups.cached(conversation) { return cached }
        let generation = groups.generation
        do {
            guard try await store.groupExists(conversation) else {
                throw RequestError(.groupNotFound, "No group is named '\(conversation.rawValue.prefix(300))'.")
            }
            let accounts = try await store.memberAccounts(of: conversation)
            return groups.store(accounts, for: conversation, loadedAt: generation)
        } catch let error as RequestError {
            throw error
        } catch let error as StorageError {
            throw RequestError(error)
        } catch {
            throw RequestError(.internal, "The server could not complete the request; nothing was written.")
        }
    }

    /// The caller's membership of a group.
    ///
    /// - Throws: as ``members(of:caller:)``, and `conversation.invalid` for a direct conversation.
    func member(of group: ConversationID, caller: AccountID) async throws(RequestError) -> GroupMember {
        guard group.groupID != nil else {
            _ = try await members(of: group, caller: caller)
            throw RequestError(.conversationInvalid, "'\(group)' is not a group.")
        }
        let member: GroupMember?
        do { member = try await store.member(caller, of: group) } catch { throw RequestError(error) }
        guard let member else {
            _ = try await members(of: group)  // group.notFound first
            throw RequestError(.conversationNotAMember, "You are not a member of group '\(group)'.")
        }
        return member
    }
}

/// The members of the groups this node has served, cached: a group message goes to every member's devices, and a
/// group may have 100,000 members. A membership change drops the group's entry (locally when committed, and from
/// other nodes' notifications). Bounded: at most `maxAccounts` member entries in all; past that the groups used least
/// recently are dropped (and loaded again when next needed).
final class GroupDirectory: Sendable {
    struct Members: Sendable {
        let accounts: [AccountID]
        let set: Set<AccountID>
        init(accounts: [AccountID]) {
            self.accounts = accounts
            self.set = Set(accounts)
        }
        func contains(_ account: AccountID) -> Bool { set.contains(account) }
    }

    private struct Entry {
        let members: Members
        var lastUsed: Int
    }

    private struct State {
        var generation = 0
        var groups: [ConversationID: Entry] = [:]
        var accounts = 0
        var clock = 0
    }

    private let entries = Locked(State())
    /// The most member entries cached over all groups.
    let maxAccounts: Int

    init(maxAccounts: Int = 500_000) { self.maxAccounts = maxAccounts }

    func cached(_ group: ConversationID) -> Members? {
        entries.withLock { state in
            guard var entry = state.groups[group] else { return nil }
            state.clock += 1
            entry.lastUsed = state.clock
            state.groups[group] = entry
            return entry.members
        }
    }

    /// Changes whenever an entry is dropped: a list loaded before a drop is not kept (it may predate the change).
    var generation: Int { entries.withLock { $0.generation } }

    /// Member entries cached now.
    var cachedAccounts: Int { entries.withLock { $0.accounts } }

    func store(_ accounts: [AccountID], for group: ConversationID, loadedAt generation: Int) -> Members {
        let members = Members(accounts: accounts)
        // A group larger than the whole cache is served without being kept.
        guard accounts.count <= maxAccounts else { return members }
        entries.withLock { state in
            guard state.generation == generation else { return }
            state.clock += 1
            if let old = state.groups[group] { state.accounts -= old.members.accounts.count }
            state.groups[group] = Entry(members: members, lastUsed: state.clock)
            state.accounts += accounts.count
            guard state.accounts > maxAccounts else { return }
            // Evict down to 90% in one pass, so that the sort is paid once per many misses, not on each.
            let target = maxAccounts / 10 * 9
            for (id, entry) in state.groups.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                guard state.accounts > target else { break }
                guard id != group else { continue }
                state.groups[id] = nil
                state.accounts -= entry.members.accounts.count
            }
        }
        return members
    }

    func invalidate(_ group: ConversationID) {
        entries.withLock { state in
            state.generation += 1
            if let old = state.groups.removeValue(forKey: group) { state.accounts -= old.members.accounts.count }
        }
    }
}
