// Courier — Apache-2.0

/// What an account shows of itself to the accounts it shares a conversation with (its *contacts*): a display name, an
/// avatar and the app's own key-values (ADR 0053). NIM `NIMUser.userInfo` (nickName, avatarUrl, ext), Agora
/// `AgoraChatUserInfo` (nickname, avatarUrl, ext), RongCloud `RCUserInfo` (name, portraitUri, extra).
///
/// Set by the account itself (``SetAccountProfileRequest``) or by the app's backend (REST); every change reaches the
/// account's devices and its contacts' devices, online as an `accountProfile` event and later through
/// ``AccountProfilesRequest/since``.
public struct AccountProfile: Hashable, Sendable, Codable {
    public let account: AccountID
    /// At most 100 characters; `nil`: never set, or cleared.
    public let displayName: String?
    /// Where the account's picture is (at most 2,048 bytes): an `https` address, or a file of the account's own on
    /// this server (`POST /v1/accounts/{account}/media`), which every account may fetch.
    public let avatar: String?
    /// Key-values of the app's own (as a message's `ext`: at most 64 keys of 1–64 characters, 4,096 bytes in all).
    public let ext: [String: String]?
    /// Orders the account's profile changes: a device keeps the profile with the highest version it has seen (0:
    /// nothing was ever set).
    public let version: Int64
    /// When it last changed (`nil`: never).
    public let updatedAt: Timestamp?

    public init(
        account: AccountID,
        displayName: String? = nil,
        avatar: String? = nil,
        ext: [String: String]? = nil,
        version: Int64 = 0,
        updatedAt: Timestamp? = nil
    ) {
        self.account = account
        self.displayName = displayName
        self.avatar = avatar
        self.ext = ext
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The limits of ``SetAccountProfileRequest``'s fields.
    public static let maxDisplayNameCharacters = 100
    public static let maxAvatarBytes = 2048
}

/// `setAccountProfile`: changes the caller's own profile. An absent field stays as it was; an empty text (or an empty
/// `ext`) clears it. The ack is the profile after the change (`accountProfile`). NIM `updateMyUserInfo:`, Agora
/// `updateOwnUserInfo`, RongCloud's app server `/user/refresh`.
public struct SetAccountProfileRequest: Hashable, Sendable, Codable {
    public let displayName: String?
    public let avatar: String?
    public let ext: [String: String]?

    public init(displayName: String? = nil, avatar: String? = nil, ext: [String: String]? = nil) {
        self.displayName = displayName
        self.avatar = avatar
        self.ext = ext
    }

    /// Nothing set.
    public var isEmpty: Bool { displayName == nil && avatar == nil && ext == nil }

    /// What is wrong with it as a change, or `nil` when it may be applied.
    public var invalidity: String? {
        if isEmpty { return "A profile change names at least one of displayName, avatar and ext." }
        if let displayName, displayName.count > AccountProfile.maxDisplayNameCharacters {
            return "displayName is at most \(AccountProfile.maxDisplayNameCharacters) characters."
        }
        if let avatar, avatar.utf8.count > AccountProfile.maxAvatarBytes { return "avatar is at most 2,048 bytes." }
        if let ext, !ext.isEmpty, !WireMessage.isValidExt(ext) {
            return "ext holds at most 64 keys of 1–64 characters and \(WireMessage.maxExtBytes) bytes in all."
        }
        return nil
    }
}

/// `accountProfiles`: reads profiles, either of the accounts named (`accounts`, at most ``maxAccounts``; any account,
/// as NIM `fetchUserInfos:` and Agora `fetchUserInfoById:` do) or the changes to the caller's and its contacts'
/// profiles since a cursor (`since`, as the previous ack handed it out; absent or empty: every profile ever set),
/// `limit` at a time (at most ``maxLimit``). A device asks with its cursor after each connect, so that what changed
/// while it was away reaches it, and keeps the cursor of the last page.
public struct AccountProfilesRequest: Hashable, Sendable, Codable {
    public let accounts: [AccountID]?
    /// Opaque: the `cursor` of an earlier ack. A cursor of another database (a restored backup) starts over.
    public let since: String?
    public let limit: Int?

    public init(accounts: [AccountID]? = nil, since: String? = nil, limit: Int? = nil) {
        self.accounts = accounts
        self.since = since
        self.limit = limit
    }

    public static let maxAccounts = 500
    public static let maxLimit = 500
}

/// The `accountProfiles` ack. With `accounts`: a profile for each named account that exists (fields `nil` when it
/// never set one). Otherwise the changed profiles (a profile may come again: keep the highest ``AccountProfile/version``),
/// the cursor to ask from next, and `hasMore` when there is more to read now.
public struct AccountProfilesAck: Hashable, Sendable, Codable {
    public let profiles: [AccountProfile]
    /// Where the next request starts (absent when `accounts` were named).
    public let cursor: String?
    public let hasMore: Bool

    public init(profiles: [AccountProfile], cursor: String? = nil, hasMore: Bool = false) {
        self.profiles = profiles
        self.cursor = cursor
        self.hasMore = hasMore
    }
}
