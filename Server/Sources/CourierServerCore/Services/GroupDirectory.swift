// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire

/// The members of the groups this node has fanned entries out to, cached under their membership version: a group
/// entry goes to every member's devices, and a group may have 100,000 members. A cached list serves only the entries
/// appended under its version (ADR 0023); any other entry reads its own audience from the store, so a change made
/// through another node is in force here the moment it commits, whether or not its notification has arrived.
/// Bounded: at most `maxAccounts` member entries in all; past that the groups used least recently are dropped (and
/// loaded again when next needed).
package final class GroupDirectory: Sendable {
    struct Members: Sendable {
        let accounts: [AccountID]
        let set: Set<AccountID>
        init(accounts: [AccountID]) {
            self.accounts = accounts
            self.set = Set(accounts)
        }
    }

    private struct Entry {
        let members: Members
        let version: Seq
        var lastUsed: Int
    }

    private struct State {
        var groups: [ConversationID: Entry] = [:]
        var accounts = 0
        var clock = 0
    }

    private let entries = Locked(State())
    /// The most member entries cached over all groups.
    let maxAccounts: Int

    package init(maxAccounts: Int = 500_000) { self.maxAccounts = maxAccounts }

    /// The members of `group` just before its entry at `seq`, appended under membership `version` (`nil`: unknown,
    /// read from the store).
    func members(
        of group: ConversationID,
        version: Seq?,
        before seq: Seq,
        store: any GroupStore
    ) async throws(StorageError) -> Members {
        if let version, let cached = cached(group, version: version) { return cached }
        let membership = try await store.membership(of: group, before: seq)
        guard membership.version == version else {
            // The membership changed after the entry (or the entry's version is unknown): this list is the entry's
            // audience, not the group's membership now.
            return Members(accounts: membership.accounts)
        }
        return self.store(membership.accounts, for: group, version: membership.version)
    }

    /// The list cached for `group` at `version`, if any.
    func cached(_ group: ConversationID, version: Seq) -> Members? {
        entries.withLock { state in
            guard var entry = state.groups[group], entry.version == version else { return nil }
            state.clock += 1
            entry.lastUsed = state.clock
            state.groups[group] = entry
            return entry.members
        }
    }

    /// Member entries cached now.
    var cachedAccounts: Int { entries.withLock { $0.accounts } }

    /// Keeps `accounts` as `group`'s membership at `version`, unless a later version is cached already.
    func store(_ accounts: [AccountID], for group: ConversationID, version: Seq) -> Members {
        let members = Members(accounts: accounts)
        // A group larger than the whole cache is served without being kept.
        guard accounts.count <= maxAccounts else { return members }
        entries.withLock { state in
            if let old = state.groups[group] {
                guard old.version < version else { return }
                state.accounts -= old.members.accounts.count
            }
            state.clock += 1
            state.groups[group] = Entry(members: members, version: version, lastUsed: state.clock)
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
}
