// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func webhookDeliveries(
        of endpoint: String,
        state: WebhookDelivery.State?,
        before cursor: Int64?,
        limit: Int
    ) async throws(StorageError) -> [WebhookDelivery] {
        try await withPooledConnection { connection in
            try await deliveries(
                on: connection,
                """
                SELECT \(unescaped: Self.deliveryColumns) FROM webhook_delivery
                WHERE endpoint_id = \(endpoint) AND (\(state?.rawValue)::text IS NULL OR state = \(state?.rawValue))
                  AND seq < \(cursor ?? Int64.max)
                ORDER BY seq DESC LIMIT \(limit)
                """
            )
        }
    }

    public func retryWebhookDeliveries(
        of endpoint: String,
        seq: Int64?,
        now: Timestamp,
        expiresAt: Timestamp
    ) async throws(StorageError) -> Int {
        try await transaction { connection in
            // One delivery by its key, or all of the endpoint's (two statements: a generic plan of one with both would
            // walk the endpoint's deliveries for one of them).
            var query: PostgresQuery = """
                UPDATE webhook_delivery
                SET state = 'pending', next_attempt_at = \(now.rawValue), expires_at = \(expiresAt.rawValue),
                    lease_until = 0, attempts = 0
                WHERE endpoint_id = \(endpoint) AND state = 'failed'
                """
            if let seq {
                query.sql += " AND seq = $\(query.binds.count + 1)"
                try query.binds.append(seq)
            }
            query.sql += " RETURNING seq"
            let rows = try await connection.query(query, logger: logger).decode(Int64.self)
            var count = 0
            for try await _ in rows { count += 1 }
            return count
        }
    }

    public func pendingWebhookDeliveries() async throws(StorageError) -> Int {
        try await withPooledConnection { connection in
            try await connection.query(
                "SELECT count(*) FROM webhook_delivery WHERE state = 'pending'",
                logger: logger
            ).decode(Int.self).first { _ in true } ?? 0
        }
    }

    public func pruneWebhookDeliveries(before cutoff: Timestamp, limit: Int) async throws(StorageError) -> Int {
        try await withPooledConnection { connection in
            // Each by its partial index (migration 11): the pending rows, however many, are never scanned. The outer
            // condition is checked again on the rows it deletes: a delivery retried meanwhile (pending again) stays.
            var pruned = 0
            for try await _ in try await connection.query(
                """
                DELETE FROM webhook_delivery WHERE seq IN (
                    SELECT seq FROM webhook_delivery WHERE state = 'delivered' AND delivered_at < \(cutoff.rawValue)
                    LIMIT \(limit))
                AND state = 'delivered' AND delivered_at < \(cutoff.rawValue)
                RETURNING seq
                """,
                logger: logger
            ).decode(Int64.self) {
                pruned += 1
            }
            guard pruned < limit else { return pruned }
            for try await _ in try await connection.query(
                """
                DELETE FROM webhook_delivery WHERE seq IN (
                    SELECT seq FROM webhook_delivery WHERE state = 'failed' AND next_attempt_at < \(cutoff.rawValue)
                    LIMIT \(limit - pruned))
                AND state = 'failed' AND next_attempt_at < \(cutoff.rawValue)
                RETURNING seq
                """,
                logger: logger
            ).decode(Int64.self) {
                pruned += 1
            }
            return pruned
        }
    }

    static let deliveryColumns = """
        seq, endpoint_id, event_id, type, conversation_id, created_at, payload, state, attempts, next_attempt_at,
        expires_at, last_status, last_error, delivered_at
        """

    func deliveries(on connection: PostgresConnection, _ query: PostgresQuery) async throws -> [WebhookDelivery] {
        var deliveries: [WebhookDelivery] = []
        let rows = try await connection.query(query, logger: logger)
        for try await row in rows {
            let columns = row.makeRandomAccess()
            let seq = try columns[0].decode(Int64.self)
            let endpoint = try columns[1].decode(String.self)
            let event = try columns[2].decode(String.self)
            let type = try columns[3].decode(String.self)
            let conversation = try columns[4].decode(String.self)
            let created = try columns[5].decode(Int64.self)
            let payload = try columns[6].decode(String.self)
            let state = try columns[7].decode(String.self)
            let attempts = try columns[8].decode(Int.self)
            let next = try columns[9].decode(Int64.self)
            let expires = try columns[10].decode(Int64?.self)
            let status = try columns[11].decode(Int?.self)
            let error = try columns[12].decode(String?.self)
            let delivered = try columns[13].decode(Int64?.self)
            deliveries.append(
                WebhookDelivery(
                    seq: seq,
                    endpointID: endpoint,
                    eventID: event,
                    type: WebhookEventType(rawValue: type),
                    conversation: ConversationID(rawValue: conversation),
                    createdAt: Timestamp(milliseconds: created),
                    payload: payload,
                    state: WebhookDelivery.State(rawValue: state) ?? .pending,
                    attempts: attempts,
                    nextAttemptAt: Timestamp(milliseconds: next),
                    expiresAt: expires.map(Timestamp.init(milliseconds:)),
                    lastStatus: status,
                    lastError: error,
                    deliveredAt: delivered.map(Timestamp.init(milliseconds:))
                )
            )
        }
        return deliveries
    }
}
