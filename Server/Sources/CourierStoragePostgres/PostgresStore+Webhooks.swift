// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore: WebhookStore {
    public func createWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws(StorageError) {
        try await transaction { connection in
            try await connection.query(
                """
                INSERT INTO webhook_endpoint (id, url, events, secret, created_at)
                VALUES (\(endpoint.id), \(endpoint.url), \(endpoint.eventFilter), \(endpoint.secret),
                        \(endpoint.createdAt.rawValue))
                """,
                logger: logger
            )
        }
    }

    public func webhookEndpoints() async throws(StorageError) -> [WebhookEndpoint] {
        try await withPooledConnection { connection in
            try await endpoints(
                on: connection,
                "SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoint ORDER BY created_at, id"
            )
        }
    }

    public func webhookEndpoint(_ id: String) async throws(StorageError) -> WebhookEndpoint? {
        try await withPooledConnection { connection in
            try await endpoints(
                on: connection,
                "SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoint WHERE id = \(id)"
            ).first
        }
    }

    public func rotateWebhookSecret(
        of id: String,
        to secret: String,
        previousValidUntil: Timestamp
    ) async throws(StorageError) -> WebhookEndpoint? {
        try await transaction { connection in
            try await endpoints(
                on: connection,
                """
                UPDATE webhook_endpoint
                SET previous_secret = secret, previous_secret_expires_at = \(previousValidUntil.rawValue),
                    secret = \(secret)
                WHERE id = \(id) RETURNING \(unescaped: Self.endpointColumns)
                """
            ).first
        }
    }

    public func deleteWebhookEndpoint(_ id: String) async throws(StorageError) -> Bool {
        try await transaction { connection in
            // The endpoint first: its row lock waits for the transactions recording deliveries for it (they hold it
            // `FOR KEY SHARE`) and holds off the next ones. Its deliveries then, in a new snapshot (read committed)
            // that sees what those transactions committed.
            let rows = try await connection.query(
                "DELETE FROM webhook_endpoint WHERE id = \(id) RETURNING id",
                logger: logger
            ).decode(String.self)
            var deleted = false
            for try await _ in rows { deleted = true }
            try await connection.query("DELETE FROM webhook_delivery WHERE endpoint_id = \(id)", logger: logger)
            return deleted
        }
    }

    public func undeliveredRecipients(
        in conversation: ConversationID,
        seq: Seq,
        excluding: [AccountID],
        after cursor: AccountID?,
        limit: Int
    ) async throws(StorageError) -> [PushRecipient] {
        try await withPooledConnection { connection in
            var accounts: [String] = []
            let rows = try await connection.query(
                """
                SELECT m.account FROM conversation_member m
                LEFT JOIN receipt r ON r.conversation_id = m.conversation_id AND r.account = m.account
                WHERE m.conversation_id = \(conversation.rawValue) AND m.account > \(cursor?.rawValue ?? "")
                  AND m.joined_seq < \(seq.rawValue) AND coalesce(r.delivered_seq, 0) < \(seq.rawValue)
                  AND coalesce(r.own_read_seq, 0) < \(seq.rawValue)
                  AND NOT (m.account = ANY(\(excluding.map(\.rawValue))))
                ORDER BY m.account LIMIT \(limit)
                """,
                logger: logger
            )
            for try await account in rows.decode(String.self) { accounts.append(account) }
            guard !accounts.isEmpty else { return [] }
            var tokens: [String: [PushToken]] = [:]
            let tokenRows = try await connection.query(
                """
                SELECT account, device, platform, token, sandbox, updated_at FROM push_token
                WHERE account = ANY(\(accounts)) ORDER BY account, device
                """,
                logger: logger
            )
            for try await (account, device, platform, token, sandbox, updated) in tokenRows.decode(
                (String, String, String, String, Bool, Int64).self
            ) {
                tokens[account, default: []].append(
                    PushToken(
                        device: DeviceID(rawValue: device),
                        platform: PushPlatform(rawValue: platform),
                        token: token,
                        sandbox: sandbox,
                        updatedAt: Timestamp(milliseconds: updated)
                    )
                )
            }
            return accounts.map { PushRecipient(account: AccountID(rawValue: $0), tokens: tokens[$0] ?? []) }
        }
    }

    static let endpointColumns = "id, url, events, secret, previous_secret, previous_secret_expires_at, created_at"

    private func endpoints(on connection: PostgresConnection, _ query: PostgresQuery) async throws -> [WebhookEndpoint] {
        var endpoints: [WebhookEndpoint] = []
        let rows = try await connection.query(query, logger: logger)
            .decode((String, String, String, String, String?, Int64?, Int64).self)
        for try await (id, url, events, secret, previous, previousUntil, created) in rows {
            endpoints.append(
                WebhookEndpoint(
                    id: id,
                    url: url,
                    events: WebhookEndpoint.events(fromFilter: events),
                    secret: secret,
                    previousSecret: previous,
                    previousSecretExpiresAt: previousUntil.map(Timestamp.init(milliseconds:)),
                    createdAt: Timestamp(milliseconds: created)
                )
            )
        }
        return endpoints
    }
}
