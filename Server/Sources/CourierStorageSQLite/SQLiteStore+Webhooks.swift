// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import GRDB

extension SQLiteStore: WebhookStore {
    /// Records `event` in the caller's transaction: one pending delivery per endpoint that wants its type. With no
    /// endpoint it writes nothing (one cached statement on an empty table).
    static func record(_ db: Database, _ event: @autoclosure () -> WebhookEventDraft?) throws {
        try record(db, events: event().map { [$0] } ?? [])
    }

    /// Records `events` (built only when some endpoint exists: without endpoints a change pays one lookup in an empty
    /// table).
    static func record(_ db: Database, events: @autoclosure () -> [WebhookEventDraft]) throws {
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM webhook_endpoint)")) == true
        else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO webhook_delivery (endpoint_id, event_id, type, conversation_id, created_at, payload,
                    next_attempt_at)
                SELECT id, ?, ?, ?, ?, ?, ? FROM webhook_endpoint
                WHERE (events = '*' AND ? <> 'message.undelivered') OR instr(',' || events || ',', ',' || ? || ',') > 0
                """
        )
        for event in events() {
            try insert.execute(arguments: [
                event.id, event.type.rawValue, event.conversation.rawValue, event.time.rawValue, event.payload,
                event.time.rawValue, event.type.rawValue, event.type.rawValue,
            ])
        }
    }

    public func createWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws(StorageError) {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO webhook_endpoint (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [endpoint.id, endpoint.url, endpoint.eventFilter, endpoint.secret, endpoint.createdAt.rawValue]
            )
        }
    }

    public func webhookEndpoints() async throws(StorageError) -> [WebhookEndpoint] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.endpointColumns) FROM webhook_endpoint ORDER BY created_at, id")
                .map(Self.endpoint)
        }
    }

    public func webhookEndpoint(_ id: String) async throws(StorageError) -> WebhookEndpoint? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.endpointColumns) FROM webhook_endpoint WHERE id = ?", arguments: [id])
                .map(Self.endpoint)
        }
    }

    public func rotateWebhookSecret(
        of id: String,
        to secret: String,
        previousValidUntil: Timestamp
    ) async throws(StorageError) -> WebhookEndpoint? {
        try await write { db in
            try Row.fetchOne(
                db,
                sql: """
                    UPDATE webhook_endpoint SET previous_secret = secret, previous_secret_expires_at = ?, secret = ?
                    WHERE id = ? RETURNING \(Self.endpointColumns)
                    """,
                arguments: [previousValidUntil.rawValue, secret, id]
            ).map(Self.endpoint)
        }
    }

    public func deleteWebhookEndpoint(_ id: String) async throws(StorageError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM webhook_delivery WHERE endpoint_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM webhook_endpoint WHERE id = ?", arguments: [id])
            return db.changesCount > 0
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
        // every pending row took 5.5 ms with 40,000 waiting, the walk 0.2 ms (docs/benchmarks.md).
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
            return try Row.fetchAll(
                db,
                sql: """
                    UPDATE webhook_delivery SET lease_until = ?
                    WHERE seq IN (\(run.map { _ in "?" }.joined(separator: ", ")))
                    RETURNING \(Self.deliveryColumns)
                    """,
                arguments: StatementArguments([leaseUntil.rawValue]) + StatementArguments(run)
            ).map(Self.delivery).sorted { $0.seq < $1.seq }
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
        let skip = count == 0 ? "" : "WHERE id NOT IN (\(Array(repeating: "?", count: count).joined(separator: ", ")))"
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

    public func webhookDeliveries(
        of endpoint: String,
        state: WebhookDelivery.State?,
        before cursor: Int64?,
        limit: Int
    ) async throws(StorageError) -> [WebhookDelivery] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.deliveryColumns) FROM webhook_delivery
                    WHERE endpoint_id = ? AND (? IS NULL OR state = ?) AND seq < ?
                    ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [endpoint, state?.rawValue, state?.rawValue, cursor ?? Int64.max, limit]
            ).map(Self.delivery)
        }
    }

    public func retryWebhookDeliveries(
        of endpoint: String,
        seq: Int64?,
        now: Timestamp,
        expiresAt: Timestamp
    ) async throws(StorageError) -> Int {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE webhook_delivery SET state = 'pending', next_attempt_at = ?, expires_at = ?, lease_until = 0,
                        attempts = 0
                    WHERE endpoint_id = ? AND state = 'failed' AND (? IS NULL OR seq = ?)
                    """,
                arguments: [now.rawValue, expiresAt.rawValue, endpoint, seq, seq]
            )
            return db.changesCount
        }
    }

    public func undeliveredRecipients(
        in conversation: ConversationID,
        seq: Seq,
        excluding: [AccountID],
        after cursor: AccountID?,
        limit: Int
    ) async throws(StorageError) -> [PushRecipient] {
        // Typed as StatementArguments from the start: `StatementArguments([…])` of mixed values picks the `[Any]`
        // initializer, which bound `cursor?.rawValue ?? ""` as NULL.
        var bound: StatementArguments = [conversation.rawValue, cursor?.rawValue ?? "", seq.rawValue, seq.rawValue, seq.rawValue]
        bound += StatementArguments(excluding.map(\.rawValue))
        bound += [limit]
        let arguments = bound
        return try await read { db in
            let accounts = try String.fetchAll(
                db,
                sql: """
                    SELECT m.account FROM conversation_member m
                    LEFT JOIN receipt r ON r.conversation_id = m.conversation_id AND r.account = m.account
                    WHERE m.conversation_id = ? AND m.account > ? AND m.joined_seq < ?
                      AND coalesce(r.delivered_seq, 0) < ? AND coalesce(r.own_read_seq, 0) < ?
                      AND m.account NOT IN (\(excluding.map { _ in "?" }.joined(separator: ", ")))
                    ORDER BY m.account LIMIT ?
                    """,
                arguments: arguments
            )
            guard !accounts.isEmpty else { return [] }
            var tokens: [String: [PushToken]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT account, device, platform, token, sandbox, updated_at FROM push_token
                    WHERE account IN (\(accounts.map { _ in "?" }.joined(separator: ", "))) ORDER BY account, device
                    """,
                arguments: StatementArguments(accounts)
            ) {
                tokens[row[0], default: []].append(Self.pushToken(row, from: 1))
            }
            return accounts.map { PushRecipient(account: AccountID(rawValue: $0), tokens: tokens[$0] ?? []) }
        }
    }

    /// One process opens the file: a lease found at start is one a killed process held.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {
        try await write { db in
            try db.execute(sql: "UPDATE webhook_delivery SET lease_until = 0 WHERE state = 'pending' AND lease_until > 0")
        }
    }

    public func pendingWebhookDeliveries() async throws(StorageError) -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM webhook_delivery WHERE state = 'pending'") ?? 0
        }
    }

    public func pruneWebhookDeliveries(before cutoff: Timestamp, limit: Int) async throws(StorageError) -> Int {
        try await write { db in
            var pruned = 0
            // Each by its partial index (schema v10): the pending rows, however many, are never scanned.
            for (state, column) in [("delivered", "delivered_at"), ("failed", "next_attempt_at")] where pruned < limit {
                try db.execute(
                    sql: """
                        DELETE FROM webhook_delivery WHERE seq IN (
                            SELECT seq FROM webhook_delivery WHERE state = '\(state)' AND \(column) < ? LIMIT ?)
                        """,
                    arguments: [cutoff.rawValue, limit - pruned]
                )
                pruned += db.changesCount
            }
            return pruned
        }
    }

    static let endpointColumns = "id, url, events, secret, previous_secret, previous_secret_expires_at, created_at"

    static func endpoint(_ row: Row) -> WebhookEndpoint {
        WebhookEndpoint(
            id: row[0],
            url: row[1],
            events: WebhookEndpoint.events(fromFilter: row[2]),
            secret: row[3],
            previousSecret: row[4],
            previousSecretExpiresAt: (row[5] as Int64?).map(Timestamp.init(milliseconds:)),
            createdAt: Timestamp(milliseconds: row[6])
        )
    }

    static let deliveryColumns = """
        seq, endpoint_id, event_id, type, conversation_id, created_at, payload, state, attempts, next_attempt_at,
        expires_at, last_status, last_error, delivered_at
        """

    static func delivery(_ row: Row) -> WebhookDelivery {
        WebhookDelivery(
            seq: row[0],
            endpointID: row[1],
            eventID: row[2],
            type: WebhookEventType(rawValue: row[3]),
            conversation: ConversationID(rawValue: row[4]),
            createdAt: Timestamp(milliseconds: row[5]),
            payload: row[6],
            state: WebhookDelivery.State(rawValue: row[7]) ?? .pending,
            attempts: row[8],
            nextAttemptAt: Timestamp(milliseconds: row[9]),
            expiresAt: (row[10] as Int64?).map(Timestamp.init(milliseconds:)),
            lastStatus: row[11],
            lastError: row[12],
            deliveredAt: (row[13] as Int64?).map(Timestamp.init(milliseconds:))
        )
    }
}
