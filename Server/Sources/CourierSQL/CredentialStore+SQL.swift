// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// API keys, signing keys and the audit trail (ADR 0048), written once for every backend that runs ``SQLQuery``s.
extension CredentialStore where Self: SQLRunner {
    /// Audit rows deleted per transaction.
    static var auditPruneBatch: Int { 5_000 }

    public func createAPIKey(_ key: APIKey) async throws(StorageError) {
        _ = try await writeRows(
            """
            INSERT INTO api_key (id, name, scopes, secret_sha256, created_at, created_by, expires_at, revoked_at)
            VALUES (\(key.id), \(key.name), \(key.scopes.joined(separator: " ")), \(key.secretDigest),
                \(key.createdAt.rawValue), \(key.createdBy), \(key.expiresAt?.rawValue), \(key.revokedAt?.rawValue))
            """
        )
    }

    public func apiKeys() async throws(StorageError) -> [APIKey] {
        try await readRows("SELECT \(unescaped: APIKey.columns) FROM api_key ORDER BY created_at DESC, id").map(APIKey.init)
    }

    public func apiKey(_ id: String) async throws(StorageError) -> APIKey? {
        try await readRows("SELECT \(unescaped: APIKey.columns) FROM api_key WHERE id = \(id)").first.map(APIKey.init)
    }

    public func revokeAPIKey(_ id: String, at time: Timestamp) async throws(StorageError) -> APIKey? {
        try await writeRows(
            """
            UPDATE api_key SET revoked_at = coalesce(revoked_at, \(time.rawValue)) WHERE id = \(id)
            RETURNING \(unescaped: APIKey.columns)
            """
        ).first.map(APIKey.init)
    }

    public func signingKeys() async throws(StorageError) -> [SigningKey] {
        try await readRows("SELECT \(unescaped: SigningKey.columns) FROM signing_key ORDER BY created_at DESC, kid")
            .map(SigningKey.init)
    }

    public func ensureSigningKey(_ key: SigningKey) async throws(StorageError) -> [SigningKey] {
        try await writeRows([
            """
            INSERT INTO signing_key (kid, secret, created_at, retires_at)
            SELECT \(key.kid), \(key.secret), \(key.createdAt.rawValue), CAST(NULL AS BIGINT)
            WHERE NOT EXISTS (SELECT 1 FROM signing_key WHERE retires_at IS NULL)
            """,
            "SELECT \(unescaped: SigningKey.columns) FROM signing_key ORDER BY created_at DESC, kid",
        ])[1].map(SigningKey.init)
    }

    public func rotateSigningKey(to key: SigningKey, retiringOthersAt retiresAt: Timestamp) async throws(StorageError) {
        _ = try await writeRows([
            """
            UPDATE signing_key SET retires_at = \(retiresAt.rawValue)
            WHERE retires_at IS NULL OR retires_at > \(retiresAt.rawValue)
            """,
            """
            INSERT INTO signing_key (kid, secret, created_at, retires_at)
            VALUES (\(key.kid), \(key.secret), \(key.createdAt.rawValue), CAST(NULL AS BIGINT))
            """,
        ])
    }

    public func retireSigningKey(_ kid: String, at time: Timestamp) async throws(StorageError) -> SigningKey? {
        // The only key that signs stays: the UPDATE leaves it, and the SELECT tells a refusal from a missing key. The
        // signing keys are locked first, so that two retirements at once cannot each see the other's key still signing.
        let rows = try await writeRows([
            "SELECT kid FROM signing_key WHERE retires_at IS NULL \(lockRows: ())",
            """
            UPDATE signing_key SET retires_at = \(time.rawValue)
            WHERE kid = \(kid) AND (retires_at IS NULL OR retires_at > \(time.rawValue))
                AND (retires_at IS NOT NULL
                    OR (SELECT count(*) FROM signing_key WHERE retires_at IS NULL) > 1)
            RETURNING \(unescaped: SigningKey.columns)
            """,
            "SELECT \(unescaped: SigningKey.columns) FROM signing_key WHERE kid = \(kid)",
        ])
        if let retired = rows[1].first { return try SigningKey(retired) }
        guard let key = try rows[2].first.map(SigningKey.init) else { return nil }
        if key.retiresAt == nil { throw .conflict }
        return key
    }

    public func recordAudit(_ entry: AuditEntry, status: Int, code: String?) async throws(StorageError) {
        _ = try await writeRows(AuditEntry.upsert(entry, status: status, code: code))
    }

    public func auditEntries(_ query: AuditQuery) async throws(StorageError) -> [AuditRecord] {
        try await readRows(
            """
            SELECT \(unescaped: AuditRecord.columns) FROM audit_entry
            WHERE (CAST(\(query.credential) AS TEXT) IS NULL OR credential = \(query.credential))
                AND (CAST(\(query.action) AS TEXT) IS NULL OR action = \(query.action))
                AND (CAST(\(query.since?.rawValue) AS BIGINT) IS NULL OR at >= \(query.since?.rawValue))
                AND (CAST(\(query.until?.rawValue) AS BIGINT) IS NULL OR at < \(query.until?.rawValue))
                AND (CAST(\(query.before) AS BIGINT) IS NULL OR seq < \(query.before))
            ORDER BY seq DESC LIMIT \(Int64(query.limit))
            """
        ).map(AuditRecord.init)
    }

    public func pruneAudit(before time: Timestamp) async throws(StorageError) -> Int {
        // In batches: one short write at a time, never the whole backlog in one transaction.
        var deleted = 0
        while true {
            let batch = try await writeRows(
                """
                DELETE FROM audit_entry WHERE seq IN
                    (SELECT seq FROM audit_entry WHERE at < \(time.rawValue) ORDER BY seq LIMIT \(Int64(Self.auditPruneBatch)))
                RETURNING seq
                """
            ).count
            deleted += batch
            if batch < Self.auditPruneBatch { return deleted }
        }
    }
}

extension AuditEntry {
    /// The row of an action: written by its first write transaction without a status (the action committed; its
    /// answer is not decided yet), or after its answer with it — which then sets the outcome of a row written before
    /// (ADR 0048).
    public static func upsert(_ entry: AuditEntry, status: Int?, code: String?) -> SQLQuery {
        """
        INSERT INTO audit_entry (id, at, credential, action, target, request_id, client_address, status, code)
        VALUES (\(entry.id), \(entry.at.rawValue), \(entry.credential), \(entry.action), \(entry.target),
            \(entry.requestID), \(entry.clientAddress), CAST(\(status.map(Int64.init)) AS BIGINT), \(code))
        ON CONFLICT (id) DO UPDATE SET status = excluded.status, code = excluded.code
        """
    }
}

extension APIKey {
    static let columns = "id, name, scopes, secret_sha256, created_at, created_by, expires_at, revoked_at"

    init(_ row: SQLRow) throws(StorageError) {
        self.init(
            id: try row.string(0),
            name: try row.string(1),
            scopes: try row.string(2).split(separator: " ").map(String.init),
            secretDigest: try row.string(3),
            createdAt: Timestamp(milliseconds: try row.int64(4)),
            createdBy: try row.string(5),
            expiresAt: try row.optionalInt64(6).map(Timestamp.init(milliseconds:)),
            revokedAt: try row.optionalInt64(7).map(Timestamp.init(milliseconds:))
        )
    }
}

extension SigningKey {
    static let columns = "kid, secret, created_at, retires_at"

    init(_ row: SQLRow) throws(StorageError) {
        self.init(
            kid: try row.string(0),
            secret: try row.string(1),
            createdAt: Timestamp(milliseconds: try row.int64(2)),
            retiresAt: try row.optionalInt64(3).map(Timestamp.init(milliseconds:))
        )
    }
}

extension AuditRecord {
    static let columns = "seq, id, at, credential, action, target, request_id, client_address, status, code"

    init(_ row: SQLRow) throws(StorageError) {
        self.init(
            seq: try row.int64(0),
            id: try row.string(1),
            at: Timestamp(milliseconds: try row.int64(2)),
            credential: try row.string(3),
            action: try row.string(4),
            target: try row.string(5),
            requestID: try row.string(6),
            clientAddress: try row.optionalString(7),
            status: try row.optionalInt(8),
            code: try row.optionalString(9)
        )
    }
}
