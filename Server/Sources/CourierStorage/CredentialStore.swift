// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// API keys, the keys that sign client tokens, and the audit trail of administrative actions (ADR 0048).
public protocol CredentialStore: Sendable {
    /// Stores a new key.
    func createAPIKey(_ key: APIKey) async throws(StorageError)
    /// Every key, revoked and expired ones included, newest first.
    func apiKeys() async throws(StorageError) -> [APIKey]
    /// One key; `nil` when there is none with this id.
    func apiKey(_ id: String) async throws(StorageError) -> APIKey?
    /// Revokes a key at `time` (a key revoked already keeps its first time); `nil` when there is none.
    func revokeAPIKey(_ id: String, at time: Timestamp) async throws(StorageError) -> APIKey?

    /// Every signing key, newest first.
    func signingKeys() async throws(StorageError) -> [SigningKey]
    /// Stores `key` if no key signs now (none without a retirement time): a database's first start. Returns the keys.
    func ensureSigningKey(_ key: SigningKey) async throws(StorageError) -> [SigningKey]
    /// Stores `key`, which signs from now on, and gives every key that signed until now `retiresAt` (sooner ones keep
    /// theirs), in one transaction.
    func rotateSigningKey(to key: SigningKey, retiringOthersAt retiresAt: Timestamp) async throws(StorageError)
    /// Retires `kid` at `time` (if that is sooner than it would have); `nil` when there is no such key. Refused with
    /// ``StorageError/conflict`` when it is the only key that signs.
    func retireSigningKey(_ kid: String, at time: Timestamp) async throws(StorageError) -> SigningKey?

    /// Writes `entry` with its outcome, or sets the outcome of the row its write transaction wrote.
    func recordAudit(_ entry: AuditEntry, status: Int, code: String?) async throws(StorageError)
    /// Entries newest first, as `query` filters and pages them.
    func auditEntries(_ query: AuditQuery) async throws(StorageError) -> [AuditRecord]
    /// Deletes the entries recorded before `time`; returns how many.
    func pruneAudit(before time: Timestamp) async throws(StorageError) -> Int
}

/// A credential for the REST API with scopes (`ck_<id>_<secret>`): the database keeps its secret's SHA-256 only.
public struct APIKey: Sendable, Hashable {
    public var id: String
    public var name: String
    public var scopes: [String]
    /// The SHA-256 of the secret, in hex.
    public var secretDigest: String
    public var createdAt: Timestamp
    /// Which credential made it: `root` (the app secret), or `cli` (`courier-server keys create`).
    public var createdBy: String
    public var expiresAt: Timestamp?
    public var revokedAt: Timestamp?

    public init(
        id: String,
        name: String,
        scopes: [String],
        secretDigest: String,
        createdAt: Timestamp,
        createdBy: String,
        expiresAt: Timestamp? = nil,
        revokedAt: Timestamp? = nil
    ) {
        self.id = id
        self.name = name
        self.scopes = scopes
        self.secretDigest = secretDigest
        self.createdAt = createdAt
        self.createdBy = createdBy
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }
}

/// A key that signs client tokens (HS256), named by the tokens' `kid`.
public struct SigningKey: Sendable, Hashable {
    public var kid: String
    public var secret: String
    public var createdAt: Timestamp
    /// From when tokens it signed are refused; `nil` while it signs.
    public var retiresAt: Timestamp?

    public init(kid: String, secret: String, createdAt: Timestamp, retiresAt: Timestamp? = nil) {
        self.kid = kid
        self.secret = secret
        self.createdAt = createdAt
        self.retiresAt = retiresAt
    }
}

/// An administrative action under way: what its row records. Set as ``AuditTrail/entry`` around the action, so that
/// the store writes the row in the transaction of the action's first write.
public final class AuditEntry: Sendable {
    public let id: String
    public let at: Timestamp
    /// `root` for the app secret, or an API key's id.
    public let credential: String
    /// The operation id (`deactivateAccount`).
    public let action: String
    /// Its path parameters (`account=alice`), comma-separated; empty when it has none.
    public let target: String
    public let requestID: String
    public let clientAddress: String?
    private let state = Locked<(recorded: Bool, closed: Bool)>((false, false))

    public init(
        id: String,
        at: Timestamp,
        credential: String,
        action: String,
        target: String,
        requestID: String,
        clientAddress: String?
    ) {
        self.id = id
        self.at = at
        self.credential = credential
        self.action = action
        self.target = target
        self.requestID = requestID
        self.clientAddress = clientAddress
    }

    /// Whether a write transaction committed the row.
    public var isRecorded: Bool { state.withLock { $0.recorded } }
    /// A write transaction committed the row.
    public func markRecorded() { state.withLock { $0.recorded = true } }
    /// The action is over: a write made afterwards (by a task it started) is not its first.
    public func close() { state.withLock { $0.closed = true } }
    /// Whether the next write transaction writes the row: not written yet, and the action not over.
    public var isPending: Bool { state.withLock { !$0.recorded && !$0.closed } }
}

/// The administrative action the current task performs, for the store's write transactions (ADR 0048).
public enum AuditTrail {
    @TaskLocal public static var entry: AuditEntry?

    /// The action whose row the next write transaction writes: one is set and its row is not written yet.
    public static var pending: AuditEntry? {
        guard let entry, entry.isPending else { return nil }
        return entry
    }
}

/// A row of the audit trail.
public struct AuditRecord: Sendable, Hashable {
    public var seq: Int64
    public var id: String
    public var at: Timestamp
    public var credential: String
    public var action: String
    public var target: String
    public var requestID: String
    public var clientAddress: String?
    /// The HTTP status answered; `nil` in a row the action's transaction wrote until the answer is recorded (the
    /// action committed; how it was answered is not known: the node stopped in between).
    public var status: Int?
    /// The error code of a refusal or failure.
    public var code: String?

    public init(
        seq: Int64,
        id: String,
        at: Timestamp,
        credential: String,
        action: String,
        target: String,
        requestID: String,
        clientAddress: String?,
        status: Int?,
        code: String?
    ) {
        self.seq = seq
        self.id = id
        self.at = at
        self.credential = credential
        self.action = action
        self.target = target
        self.requestID = requestID
        self.clientAddress = clientAddress
        self.status = status
        self.code = code
    }
}

/// Which rows of the audit trail, newest first.
public struct AuditQuery: Sendable, Hashable {
    public var credential: String?
    public var action: String?
    public var since: Timestamp?
    public var until: Timestamp?
    /// Rows before this seq (the previous page's last).
    public var before: Int64?
    public var limit: Int

    public init(
        credential: String? = nil,
        action: String? = nil,
        since: Timestamp? = nil,
        until: Timestamp? = nil,
        before: Int64? = nil,
        limit: Int = 100
    ) {
        self.credential = credential
        self.action = action
        self.since = since
        self.until = until
        self.before = before
        self.limit = limit
    }
}
