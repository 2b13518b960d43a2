// Courier — Apache-2.0
public import CourierWire

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
        case .profileChanged:
            // NIM's default (`updateInfoMode` manager), Agora's and RongCloud's: the owner and admins.
            guard actorRole != .member, change.profile.map({ !$0.isEmpty }) == true else { throw .notPermitted }
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
