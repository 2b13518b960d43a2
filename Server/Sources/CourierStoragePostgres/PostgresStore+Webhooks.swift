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

    public func claimWebhookDeliveries(
        now: Timestamp,
        leaseUntil: Timestamp,
        limit: Int,
        runLength: Int,
        slots: WebhookSlots
    ) async throws(StorageError) -> [WebhookDelivery] {
        // Look first, outside a transaction: usually nothing is due, and then nothing is locked or written. The queues
        // are walked one index seek each (a loose index scan of the partial queue index), so a look costs the number
        // of queues, not the backlog.
        let candidates = try await withPooledConnection { connection in
            var heads: [(seq: Int64, endpoint: String)] = []
            let rows = try await connection.query(
                """
                WITH RECURSIVE queue(endpoint_id, conversation_id) AS (
                    SELECT e.id, (SELECT min(conversation_id) FROM webhook_delivery
                                  WHERE state = 'pending' AND endpoint_id = e.id)
                    FROM webhook_endpoint e WHERE NOT (e.id = ANY(\(slots.full)))
                    UNION ALL
                    SELECT q.endpoint_id, (SELECT min(conversation_id) FROM webhook_delivery
                                           WHERE state = 'pending' AND endpoint_id = q.endpoint_id
                                             AND conversation_id > q.conversation_id)
                    FROM queue q WHERE q.conversation_id IS NOT NULL
                )
                SELECT d.seq, d.endpoint_id FROM queue q
                CROSS JOIN LATERAL (
                    SELECT seq, endpoint_id, next_attempt_at, lease_until FROM webhook_delivery
                    WHERE state = 'pending' AND endpoint_id = q.endpoint_id AND conversation_id = q.conversation_id
                    ORDER BY seq LIMIT 1) d
                WHERE q.conversation_id IS NOT NULL AND d.next_attempt_at <= \(now.rawValue)
                  AND d.lease_until <= \(now.rawValue)
                ORDER BY d.seq LIMIT \(limit * 4)
                """,
                logger: logger
            )
            for try await (seq, endpoint) in rows.decode((Int64, String).self) { heads.append((seq, endpoint)) }
            return heads
        }
        let picked = slots.pick(candidates, limit: limit)
        guard !picked.isEmpty else { return [] }
        return try await transaction { connection in
            // SKIP LOCKED: nodes claiming at once take different heads, each still its queue's head and free; the
            // lease keeps a claimed head from being claimed again while its run is under way, and so the rest of its
            // queue waits for it.
            let heads = try await deliveries(
                on: connection,
                """
                UPDATE webhook_delivery SET lease_until = \(leaseUntil.rawValue)
                WHERE seq IN (
                    SELECT d.seq FROM webhook_delivery d
                    WHERE d.seq = ANY(\(picked)) AND d.state = 'pending' AND d.lease_until <= \(now.rawValue)
                      AND d.next_attempt_at <= \(now.rawValue)
                      AND d.seq = (
                          SELECT min(e.seq) FROM webhook_delivery e
                          WHERE e.state = 'pending' AND e.endpoint_id = d.endpoint_id
                            AND e.conversation_id = d.conversation_id)
                    FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: Self.deliveryColumns)
                """
            )
            guard !heads.isEmpty, runLength > 1 else { return heads.sorted { $0.seq < $1.seq } }
            // Behind each head, the pending deliveries of its queue that are due and free, without a gap: no other
            // node starts a run in a queue whose head is leased.
            let followers = try await deliveries(
                on: connection,
                """
                UPDATE webhook_delivery SET lease_until = \(leaseUntil.rawValue)
                WHERE seq IN (
                    SELECT r.seq FROM unnest(\(heads.map(\.seq)), \(heads.map(\.endpointID)),
                        \(heads.map(\.conversation.rawValue))) AS h(seq, endpoint_id, conversation_id)
                    CROSS JOIN LATERAL (
                        SELECT q.seq, bool_and(q.free) OVER (ORDER BY q.seq) AS run FROM (
                            SELECT x.seq, x.next_attempt_at <= \(now.rawValue) AND x.lease_until <= \(now.rawValue)
                                AS free
                            FROM webhook_delivery x
                            WHERE x.endpoint_id = h.endpoint_id AND x.conversation_id = h.conversation_id
                              AND x.state = 'pending' AND x.seq > h.seq
                            ORDER BY x.seq LIMIT \(runLength - 1)) q
                    ) r
                    WHERE r.run)
                RETURNING \(unescaped: Self.deliveryColumns)
                """
            )
            return (heads + followers).sorted { $0.seq < $1.seq }
        }
    }

    public func recordWebhookAttempts(_ attempts: [WebhookAttempt]) async throws(StorageError) {
        guard !attempts.isEmpty else { return }
        // Every outcome in one statement (one round trip however long the run): arrays of the same length, unnested
        // side by side. PostgreSQL arrays here carry no NULLs, so "none" travels as a value no outcome has (-1, 0 or
        // an empty text) and NULLIF turns it back.
        var seqs: [Int64] = [], leases: [Int64] = [], states: [String] = [], attempted: [Bool] = []
        var nexts: [Int64] = [], statuses: [Int64] = [], errors: [String] = [], delivereds: [Int64] = []
        for attempt in attempts {
            let (state, counts, next, delivered): (String, Bool, Int64?, Int64?) =
                switch attempt.outcome {
                case .delivered: ("delivered", true, nil, attempt.at.rawValue)
                case .retry(let at): ("pending", true, at.rawValue, nil)
                case .failed: ("failed", true, nil, nil)
                case .released: ("pending", false, nil, nil)
                case .deferred(let until): ("pending", false, until.rawValue, nil)
                }
            seqs.append(attempt.seq)
            leases.append(attempt.lease.rawValue)
            states.append(state)
            attempted.append(counts)
            nexts.append(next ?? -1)
            statuses.append(Int64(attempt.status ?? 0))
            errors.append(attempt.error ?? "")
            delivereds.append(delivered ?? 0)
        }
        try await transaction { connection in
            // The endpoint answered: its other deliveries waiting out a backoff are due now (before this run's outcomes
            // are written, so a retry the run itself schedules keeps its backoff). Found by the index of
            // pending deliveries due later (a few); without statistics the planner took the queue index and read
            // every pending delivery of the endpoint (11 ms with 30,000 waiting), hence the materialized look first.
            if let success = attempts.last(where: { $0.outcome == .delivered && $0.status != nil }) {
                try await connection.query(
                    """
                    WITH backoff AS MATERIALIZED (
                        SELECT seq, endpoint_id FROM webhook_delivery
                        WHERE state = 'pending' AND attempts > 0 AND next_attempt_at > \(success.at.rawValue))
                    UPDATE webhook_delivery SET next_attempt_at = \(success.at.rawValue)
                    WHERE seq IN (
                        SELECT seq FROM backoff
                        WHERE endpoint_id = (SELECT endpoint_id FROM webhook_delivery WHERE seq = \(success.seq)))
                    """,
                    logger: logger
                )
            }
            // A released or deferred delivery was not attempted: its count and last outcome stay.
            try await connection.query(
                """
                UPDATE webhook_delivery d SET state = a.state,
                    attempts = d.attempts + CASE WHEN a.attempted THEN 1 ELSE 0 END,
                    next_attempt_at = coalesce(NULLIF(a.next, -1), d.next_attempt_at), lease_until = 0,
                    last_status = CASE WHEN a.attempted THEN NULLIF(a.status, 0)::int ELSE d.last_status END,
                    last_error = CASE WHEN a.attempted THEN NULLIF(a.error, '') ELSE d.last_error END,
                    delivered_at = CASE WHEN a.attempted THEN NULLIF(a.delivered, 0) ELSE d.delivered_at END
                FROM unnest(\(seqs), \(leases), \(states), \(attempted), \(nexts), \(statuses), \(errors),
                    \(delivereds)) AS a(seq, lease, state, attempted, next, status, error, delivered)
                WHERE d.seq = a.seq AND d.state = 'pending' AND d.lease_until = a.lease
                """,
                logger: logger
            )
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

    /// Other nodes may be mid-attempt: their leases run out on their own.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {}

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

    static let deliveryColumns = """
        seq, endpoint_id, event_id, type, conversation_id, created_at, payload, state, attempts, next_attempt_at,
        expires_at, last_status, last_error, delivered_at
        """

    private func deliveries(on connection: PostgresConnection, _ query: PostgresQuery) async throws -> [WebhookDelivery] {
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
