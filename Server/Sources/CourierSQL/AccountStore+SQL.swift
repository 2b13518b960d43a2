// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Accounts and push tokens, written once for every backend that runs ``SQLQuery``s.
extension AccountStore where Self: SQLRunner {
    public func setPushToken(_ token: PushToken?, of account: AccountID, device: DeviceID) async throws(StorageError) {
        // A token belongs to one device: registering it elsewhere takes it from the device that had it.
        var writes: [SQLQuery] = [
            """
            DELETE FROM push_token WHERE (account = \(account.rawValue) AND device = \(device.rawValue))
                OR (platform = \(token?.platform.rawValue) AND token = \(token?.token))
            """
        ]
        if let token {
            writes.append(
                """
                INSERT INTO push_token (account, device, platform, token, sandbox, updated_at)
                VALUES (\(account.rawValue), \(device.rawValue), \(token.platform.rawValue), \(token.token),
                    \(token.sandbox), \(token.updatedAt.rawValue))
                """
            )
        }
        _ = try await writeRows(writes)
    }

    public func pushTokens(of account: AccountID) async throws(StorageError) -> [PushToken] {
        try await readRows(
            """
            SELECT \(unescaped: PushToken.columns) FROM push_token WHERE account = \(account.rawValue) ORDER BY device
            """
        ).map { row throws(StorageError) in try PushToken(row, from: 0) }
    }

    public func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError) {
        try await registerAccounts([account], at: time)
    }

    public func registerAccounts(_ accounts: [AccountID], at time: Timestamp) async throws(StorageError) {
        _ = try await writeRows(
            """
            INSERT INTO account (id, created_at) SELECT value, \(time.rawValue) FROM \(list: accounts.map(\.rawValue)) AS l
            WHERE true ON CONFLICT (id) DO NOTHING
            """
        )
    }

    public func accountExists(_ account: AccountID) async throws(StorageError) -> Bool {
        try await !readRows("SELECT 1 FROM account WHERE id = \(account.rawValue)").isEmpty
    }

    public func accountStatus(_ account: AccountID) async throws(StorageError) -> AccountStatus? {
        try await readRows("SELECT \(unescaped: AccountStatus.columns) FROM account WHERE id = \(account.rawValue)")
            .first.map(AccountStatus.init)
    }

    public func accounts(
        prefix: String?,
        after cursor: AccountID?,
        limit: Int
    ) async throws(StorageError) -> [AccountStatus] {
        // The prefix is compared as text (`substr`), not as a range of ids: a PostgreSQL database's collation (say,
        // en_US) need not order ids by their bytes. The walk follows the primary key from the cursor.
        let prefix = prefix ?? ""
        return try await readRows(
            """
            SELECT \(unescaped: AccountStatus.columns) FROM account
            WHERE id > \(cursor?.rawValue ?? "") AND substr(id, 1, \(unescaped: String(prefix.utf8.count))) = \(prefix)
            ORDER BY id LIMIT \(limit)
            """
        ).map(AccountStatus.init)
    }

    public func setDeactivated(_ account: AccountID, at time: Timestamp?) async throws(StorageError) -> AccountStatus? {
        try await moderate(account, "UPDATE account SET deactivated_at = \(time?.rawValue) WHERE id = \(account.rawValue)")
    }

    public func revokeTokens(of account: AccountID, before time: Timestamp) async throws(StorageError) -> AccountStatus? {
        try await moderate(account, "UPDATE account SET tokens_revoked_at = \(time.rawValue) WHERE id = \(account.rawValue)")
    }

    public func restrictedAccounts(among accounts: [AccountID]) async throws(StorageError) -> [AccountStatus] {
        guard !accounts.isEmpty else { return [] }
        return try await readRows(
            """
            SELECT \(unescaped: AccountStatus.columns) FROM account
            WHERE id IN \(list: accounts.map(\.rawValue)) AND (deactivated_at IS NOT NULL OR tokens_revoked_at IS NOT NULL)
            """
        ).map(AccountStatus.init)
    }

    public func announce(_ change: Change) async throws(StorageError) {
        guard let notify = try notification(.change(change)) else { return }
        _ = try await writeRows(notify)
    }

    /// Runs `update` on `account`'s row and, in the same transaction, tells the other nodes
    /// (``SQLRunner/notification(_:)``), which close its sessions.
    private func moderate(_ account: AccountID, _ update: SQLQuery) async throws(StorageError) -> AccountStatus? {
        var queries = [update + " RETURNING \(unescaped: AccountStatus.columns)"]
        if let notify = try notification(.change(.accountChanged(account))) { queries.append(notify) }
        return try await writeRows(queries)[0].first.map(AccountStatus.init)
    }
}

extension AccountStatus {
    /// The columns ``init(_:)`` reads.
    public static let columns = "id, created_at, deactivated_at, tokens_revoked_at"

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            account: AccountID(rawValue: try row.string(0)),
            createdAt: Timestamp(milliseconds: try row.int64(1)),
            deactivatedAt: try row.optionalInt64(2).map(Timestamp.init(milliseconds:)),
            tokensRevokedAt: try row.optionalInt64(3).map(Timestamp.init(milliseconds:))
        )
    }
}

extension PushToken {
    /// The columns ``init(_:from:)`` reads.
    static let columns = "device, platform, token, sandbox, updated_at"

    /// A token from ``columns``, starting at column `first`.
    init(_ row: SQLRow, from first: Int) throws(StorageError) {
        self.init(
            device: DeviceID(rawValue: try row.string(first)),
            platform: PushPlatform(rawValue: try row.string(first + 1)),
            token: try row.string(first + 2),
            sandbox: try row.bool(first + 3),
            updatedAt: Timestamp(milliseconds: try row.int64(first + 4))
        )
    }
}

/// Refuses with ``StorageError/accountNotFound(_:)`` the first of `accounts` that is not registered.
public struct AccountCheck: SQLProcedure {
    let accounts: [AccountID]

    public init(_ accounts: [AccountID]) {
        self.accounts = accounts
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Void> {
        guard !accounts.isEmpty else { return .done(()) }
        guard let rows else { return .run("SELECT id FROM account WHERE id IN \(list: accounts.map(\.rawValue))") }
        let known = Set(try rows.map { row throws(StorageError) in try row.string(0) })
        if let missing = accounts.first(where: { !known.contains($0.rawValue) }) { throw .accountNotFound(missing) }
        return .done(())
    }
}
