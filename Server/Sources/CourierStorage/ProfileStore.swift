// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Account profiles (ADR 0053): kept on the account's row with the stamp of their last change, so that a device
/// asks for what changed among its contacts since a cursor.
public protocol ProfileStore: Sendable {
    /// Applies each change to a registered account, in one transaction that, when `announced`, also records the
    /// `account.updated` webhook events and tells the other nodes (an import's are told to nobody: devices ask for
    /// what changed when they connect); returns the profiles after it, in the order of `changes`.
    ///
    /// - Throws: ``StorageError/accountNotFound(_:)`` naming the first account that is not registered (nothing
    ///   written).
    func setAccountProfiles(_ changes: [AccountProfileChange], at time: Timestamp, announced: Bool)
        async throws(StorageError) -> [AccountProfile]
    /// The profiles of the registered accounts among `accounts`, in the order given.
    func accountProfiles(of accounts: [AccountID]) async throws(StorageError) -> [AccountProfile]
    /// The profiles of `account` and its contacts whose last change has a stamp at or after `stamp`, after
    /// `position` in (stamp, account) order, at most `limit`.
    func changedProfiles(
        seenBy account: AccountID,
        from stamp: Int64,
        after position: ProfilePosition?,
        limit: Int
    ) async throws(StorageError) -> [AccountProfile]
    /// The accounts `account` shares a conversation with now (a direct one or a group), itself included when it is
    /// in any.
    func contacts(of account: AccountID) async throws(StorageError) -> [AccountID]
}

extension ProfileStore {
    /// Applies each change and announces it (``setAccountProfiles(_:at:announced:)``).
    public func setAccountProfiles(_ changes: [AccountProfileChange], at time: Timestamp) async throws(StorageError)
        -> [AccountProfile]
    {
        try await setAccountProfiles(changes, at: time, announced: true)
    }
}

/// One account's profile change.
public struct AccountProfileChange: Hashable, Sendable {
    public let account: AccountID
    public let fields: SetAccountProfileRequest

    public init(account: AccountID, fields: SetAccountProfileRequest) {
        self.account = account
        self.fields = fields
    }
}

/// Where a page of changed profiles stopped: the last one's stamp and account.
public struct ProfilePosition: Hashable, Sendable {
    public let stamp: Int64
    public let account: AccountID

    public init(stamp: Int64, account: AccountID) {
        self.stamp = stamp
        self.account = account
    }
}
