// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
public import CourierWire
internal import GRDB

extension SQLiteStore: WebhookStore {
    /// Writes the webhook events of `change` to the log in the caller's transaction (ADR 0030), each once, when an
    /// endpoint wants its type (built only when some endpoint exists: without endpoints a change pays one lookup in
    /// an empty table).
    static func announce(_ db: Database, _ change: Change?) throws {
        guard let change else { return }
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM webhook_endpoint)")) == true
        else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT change_stamp(), ?, ?, ?, ?, ?, ?
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint WHERE \(WebhookEndpoint.wants("?")))
                """
        )
        for event in change.webhookEvents {
            try insert.execute(arguments: [
                event.id, event.type.rawValue, event.conversation.rawValue, event.messageID?.rawValue,
                event.time.rawValue, event.payload, event.type.rawValue, event.type.rawValue,
            ])
        }
    }

    public func claimWebhookDeliveries(
        now: Timestamp,
        leaseUntil: Timestamp,
        limit: Int,
        runLength: Int,
        slots: WebhookSlots
    ) async throws(StorageError) -> [WebhookDelivery] {
        let full = slots.full
        // Pick the due queue heads on a reader (the writer and its group commit are left alone, also while a
        // backlog waits on an endpoint that is down), then lease each with the run behind it on the writer. The
        // queues are walked one index seek each (a loose index scan of the partial queue index: each endpoint's next
        // conversation with pending deliveries), so a claim costs the number of queues, not the backlog: grouping
        // every pending row took 5.5 ms with 40,000 waiting, the walk 0.2 ms (docs/benchmarks-history.md).
        let candidates = try await read { db in
            try Row.fetchAll(
                db,
                sql: Self.queueHeads(skippingEndpoints: full.count),
                arguments: StatementArguments(full) + [now.rawValue, now.rawValue, limit * 4]
            ).map { (seq: $0[0] as Int64, endpoint: $0[1] as String, conversation: $0[2] as String) }
        }
        let picked = Set(slots.pick(candidates.map { ($0.seq, $0.endpoint) }, limit: limit))
        let heads = candidates.filter { picked.contains($0.seq) }
        guard !heads.isEmpty else { return [] }
        return try await write { db in
            // On the writer, each queue's oldest pending deliveries again (the partial queue index): the run is the
            // prefix that is due and free, so it starts at the true head and has no gap.
            var run: [Int64] = []
            let queue = try db.cachedStatement(
                sql: """
                    SELECT seq, next_attempt_at <= ? AND lease_until <= ? FROM webhook_delivery
                    WHERE endpoint_id = ? AND conversation_id = ? AND state = 'pending'
                    ORDER BY seq LIMIT ?
                    """
            )
            for head in heads {
                let rows = try Row.fetchAll(
                    queue,
                    arguments: [now.rawValue, now.rawValue, head.endpoint, head.conversation, max(1, runLength)]
                )
                for row in rows {
                    guard row[1] as Bool else { break }
                    run.append(row[0])
                }
            }
            guard !run.isEmpty else { return [] }
            return try db.rows(
                """
                UPDATE webhook_delivery SET lease_until = \(leaseUntil.rawValue) WHERE seq IN \(list: run)
                RETURNING \(unescaped: WebhookDelivery.columns)
                """
            ).map(WebhookDelivery.init).sorted { $0.seq < $1.seq }
        }
    }

    public func recordWebhookAttempts(_ attempts: [WebhookAttempt]) async throws(StorageError) {
        guard !attempts.isEmpty else { return }
        try await write { db in
            // The endpoint answered: its other deliveries waiting out a backoff are due now. Done before this run's
            // outcomes are written, so a retry the run itself schedules (a 503 after a 204) keeps its backoff.
            if let success = attempts.last(where: { $0.outcome == .delivered && $0.status != nil }) {
                try db.execute(
                    sql: Self.dueAfterSuccess,
                    arguments: [success.at.rawValue, success.at.rawValue, success.seq]
                )
            }
            let attempted = try db.cachedStatement(
                sql: """
                    UPDATE webhook_delivery SET state = ?, attempts = attempts + 1,
                        next_attempt_at = coalesce(?, next_attempt_at), lease_until = 0, last_status = ?,
                        last_error = ?, delivered_at = ?
                    WHERE seq = ? AND state = 'pending' AND lease_until = ?
                    """
            )
            let released = try db.cachedStatement(
                sql: """
                    UPDATE webhook_delivery SET lease_until = 0, next_attempt_at = coalesce(?, next_attempt_at)
                    WHERE seq = ? AND state = 'pending' AND lease_until = ?
                    """
            )
            for attempt in attempts {
                let (state, next, delivered): (String, Int64?, Int64?)
                switch attempt.outcome {
                case .delivered: (state, next, delivered) = ("delivered", nil, attempt.at.rawValue)
                case .retry(let at): (state, next, delivered) = ("pending", at.rawValue, nil)
                case .failed: (state, next, delivered) = ("failed", nil, nil)
                case .released:
                    try released.execute(arguments: [nil as Int64?, attempt.seq, attempt.lease.rawValue])
                    continue
                case .deferred(let until):
                    try released.execute(arguments: [until.rawValue, attempt.seq, attempt.lease.rawValue])
                    continue
                }
                try attempted.execute(arguments: [
                    state, next, attempt.status, attempt.error, delivered, attempt.seq, attempt.lease.rawValue,
                ])
            }
        }
    }

    /// The due and free queue heads, oldest first: one per endpoint (but `skippingEndpoints` given ones) and
    /// conversation with pending deliveries. Arguments: the skipped endpoints, now twice, the limit.
    static func queueHeads(skippingEndpoints count: Int) -> String {
        // Paused endpoints are skipped: their deliveries wait.
        let skip =
            "WHERE paused_at IS NULL"
            + (count == 0 ? "" : " AND id NOT IN (\(Array(repeating: "?", count: count).joined(separator: ", ")))")
        return """
            WITH RECURSIVE queue(endpoint_id, conversation_id) AS (
                SELECT id, (SELECT min(conversation_id) FROM webhook_delivery
                            WHERE state = 'pending' AND endpoint_id = id)
                FROM webhook_endpoint \(skip)
                UNION ALL
                SELECT q.endpoint_id, (SELECT min(conversation_id) FROM webhook_delivery
                                       WHERE state = 'pending' AND endpoint_id = q.endpoint_id
                                         AND conversation_id > q.conversation_id)
                FROM queue q WHERE q.conversation_id IS NOT NULL
            )
            SELECT d.seq, d.endpoint_id, d.conversation_id FROM queue q
            JOIN webhook_delivery d ON d.seq = (
                SELECT min(seq) FROM webhook_delivery WHERE state = 'pending'
                  AND endpoint_id = q.endpoint_id AND conversation_id = q.conversation_id)
            WHERE q.conversation_id IS NOT NULL AND d.next_attempt_at <= ? AND d.lease_until <= ?
            ORDER BY d.seq LIMIT ?
            """
    }

    /// Makes an endpoint's deliveries waiting out a backoff due now. By the partial index of pending deliveries due
    /// later (a few, those in backoff): left to itself SQLite's planner took the endpoint's index instead and read
    /// every delivery the endpoint ever had, delivered ones included, on every recorded run (12 % of the server's CPU
    /// in `courier-bench direct --webhooks`, and growing with the retained history).
    static let dueAfterSuccess = """
        UPDATE webhook_delivery INDEXED BY webhook_delivery_due SET next_attempt_at = ?
        WHERE state = 'pending' AND attempts > 0 AND next_attempt_at > ?
          AND endpoint_id = (SELECT endpoint_id FROM webhook_delivery WHERE seq = ?)
        """

    /// One process opens the file: a lease found at start is one a killed process held.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {
        try await write { db in
            try db.execute(sql: "UPDATE webhook_delivery SET lease_until = 0 WHERE state = 'pending' AND lease_until > 0")
            try db.execute(sql: "UPDATE webhook_endpoint SET cursor_lease_until = 0 WHERE cursor_lease_until <> 0")
        }
    }
}
