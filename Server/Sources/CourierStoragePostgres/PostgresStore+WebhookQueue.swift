// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
public import CourierWire
internal import PostgresNIO

extension PostgresStore: WebhookStore {
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
                    FROM webhook_endpoint e WHERE e.paused_at IS NULL AND NOT (e.id = ANY(\(slots.full)))
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
                RETURNING \(unescaped: WebhookDelivery.columns)
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
                RETURNING \(unescaped: WebhookDelivery.columns)
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
        let columns = (seqs, leases, states, attempted, nexts, statuses, errors, delivereds)
        try await transaction { connection in
            let (seqs, leases, states, attempted, nexts, statuses, errors, delivereds) = columns
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

    /// Other nodes may be mid-attempt: their leases run out on their own.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {}

    func deliveries(on connection: PostgresConnection, _ query: PostgresQuery) async throws -> [WebhookDelivery] {
        var deliveries: [WebhookDelivery] = []
        for try await row in try await connection.query(query, logger: logger) {
            deliveries.append(try WebhookDelivery(SQLRow(row.map(SQLValue.init))))
        }
        return deliveries
    }
}
