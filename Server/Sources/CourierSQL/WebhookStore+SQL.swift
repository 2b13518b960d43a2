// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Webhook endpoints, the deliveries the API lists, retries and prunes, and the recipients of a push: written once
/// for every backend that runs ``SQLQuery``s, as the streams' statements are (`WebhookLog+SQL.swift`).
extension WebhookStore where Self: SQLRunner {
    public func webhookEndpoints() async throws(StorageError) -> [WebhookEndpoint] {
        try await readRows("SELECT \(unescaped: WebhookEndpoint.columns) FROM webhook_endpoint ORDER BY created_at, id")
            .map(WebhookEndpoint.init)
    }

    public func webhookEndpoint(_ id: String) async throws(StorageError) -> WebhookEndpoint? {
        try await readRows("SELECT \(unescaped: WebhookEndpoint.columns) FROM webhook_endpoint WHERE id = \(id)")
            .first.map(WebhookEndpoint.init)
    }

    public func rotateWebhookSecret(
        of id: String,
        to secret: String,
        previousValidUntil: Timestamp
    ) async throws(StorageError) -> WebhookEndpoint? {
        try await writeRows(
            """
            UPDATE webhook_endpoint
            SET previous_secret = secret, previous_secret_expires_at = \(previousValidUntil.rawValue), secret = \(secret)
            WHERE id = \(id) RETURNING \(unescaped: WebhookEndpoint.columns)
            """
        ).first.map(WebhookEndpoint.init)
    }

    public func deleteWebhookEndpoint(_ id: String) async throws(StorageError) -> Bool {
        // The endpoint first: on PostgreSQL its row lock waits for a stream's write under way (which takes the row
        // first) and holds off the next ones. Its parked deliveries then, in a new snapshot (read committed) that sees
        // what that write committed. No delivery outlives its endpoint; its events stay in the log for the others.
        try await !writeRows([
            "DELETE FROM webhook_endpoint WHERE id = \(id) RETURNING id",
            "DELETE FROM webhook_delivery WHERE endpoint_id = \(id)",
        ])[0].isEmpty
    }

    public func updateWebhookEndpoint(
        _ id: String,
        url: String?,
        events: [WebhookEventType]??,
        batch: Int?
    ) async throws(StorageError) -> WebhookEndpoint? {
        let filter = events.map(WebhookEndpoint.filter(of:))
        return try await writeRows(
            """
            UPDATE webhook_endpoint SET url = coalesce(\(url), url), events = coalesce(\(filter), events),
                batch_size = coalesce(\(batch.map(Int64.init)), batch_size)
            WHERE id = \(id) RETURNING \(unescaped: WebhookEndpoint.columns)
            """
        ).first.map(WebhookEndpoint.init)
    }

    public func pauseWebhookEndpoint(_ id: String, at time: Timestamp?) async throws(StorageError) -> WebhookEndpoint? {
        try await writeRows(
            """
            UPDATE webhook_endpoint SET paused_at = \(time?.rawValue)
            WHERE id = \(id) RETURNING \(unescaped: WebhookEndpoint.columns)
            """
        ).first.map(WebhookEndpoint.init)
    }

    public func retryWebhookDeliveries(
        of endpoint: String,
        seq: Int64?,
        now: Timestamp,
        expiresAt: Timestamp
    ) async throws(StorageError) -> Int {
        // One delivery by its key, or all of the endpoint's: two statements, since a generic plan of one with both
        // would walk the endpoint's deliveries for one of them.
        var retry: SQLQuery = """
            UPDATE webhook_delivery
            SET state = 'pending', next_attempt_at = \(now.rawValue), expires_at = \(expiresAt.rawValue),
                attempts = 0
            WHERE endpoint_id = \(endpoint) AND state = 'failed'
            """
        if let seq { retry += " AND coalesce(event_position, seq) = \(seq)" }
        return try await writeRows(retry + " RETURNING seq").count
    }

    public func undeliveredRecipients(
        in conversation: ConversationID,
        seq: Seq,
        excluding: [AccountID],
        after cursor: AccountID?,
        limit: Int
    ) async throws(StorageError) -> [PushRecipient] {
        let accounts = try await readRows(
            """
            SELECT m.account, coalesce(v.muted, 0) FROM conversation_member m
            LEFT JOIN receipt r ON r.conversation_id = m.conversation_id AND r.account = m.account
            LEFT JOIN conversation_view v ON v.conversation_id = m.conversation_id AND v.account = m.account
            WHERE m.conversation_id = \(conversation.rawValue) AND m.account > \(cursor?.rawValue ?? "")
              AND m.joined_seq < \(seq.rawValue) AND coalesce(r.delivered_seq, 0) < \(seq.rawValue)
              AND coalesce(r.own_read_seq, 0) < \(seq.rawValue)
              AND m.account NOT IN \(list: excluding.map(\.rawValue))
            ORDER BY m.account LIMIT \(limit)
            """
        ).map { row throws(StorageError) in (account: try row.string(0), muted: try row.int64(1) != 0) }
        guard !accounts.isEmpty else { return [] }
        var tokens: [String: [PushToken]] = [:]
        for row in try await readRows(
            """
            SELECT account, \(unescaped: PushToken.columns) FROM push_token
            WHERE account IN \(list: accounts.map(\.account)) ORDER BY account, device
            """
        ) {
            tokens[try row.string(0), default: []].append(try PushToken(row, from: 1))
        }
        return accounts.map {
            PushRecipient(account: AccountID(rawValue: $0.account), tokens: tokens[$0.account] ?? [], muted: $0.muted)
        }
    }
}

/// What reads the event log with the deliveries (ADR 0030).
extension WebhookStore where Self: SQLRunner & ChangeStore {
    public func createWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws(StorageError) {
        // It starts after every event committed so far, and lists only events after that.
        let start = try await startingCursor()
        _ = try await writeRows(
            """
            INSERT INTO webhook_endpoint (id, url, events, secret, created_at, cursor_stamp, cursor_position,
                start_stamp, start_position, batch_size)
            VALUES (\(endpoint.id), \(endpoint.url), \(WebhookEndpoint.filter(of: endpoint.events)), \(endpoint.secret),
                \(endpoint.createdAt.rawValue), \(start.stamp), \(start.position), \(start.stamp), \(start.position),
                \(Int64(endpoint.batch)))
            """
        )
    }

    public func webhookDeliveries(
        of endpoint: String,
        state: WebhookDelivery.State?,
        before cursor: Int64?,
        limit: Int
    ) async throws(StorageError) -> [WebhookDelivery] {
        guard
            let row = try await readRows(
                """
                SELECT \(unescaped: WebhookEndpoint.columns), cursor_stamp, cursor_position, start_stamp, start_position
                FROM webhook_endpoint WHERE id = \(endpoint)
                """
            ).first
        else { return [] }
        let found = try WebhookEndpoint(row)
        let after = WebhookEndpoint.columnCount
        let (cursorStamp, cursorPosition) = (try row.int64(after), try row.int64(after + 1))
        let (startStamp, startPosition) = (try row.int64(after + 2), try row.int64(after + 3))
        let before = cursor ?? Int64.max
        // The deliveries with a row of their own (attempted and not accepted at once, or waiting behind one), and the
        // log's events the endpoint wants since it was added: delivered at their first attempt (behind its cursor) or
        // not yet handed over (ahead of it). One statement, so an event parked meanwhile is seen on one side (one
        // delivered meanwhile may still show as pending).
        let kept: SQLQuery = """
            SELECT \(unescaped: WebhookDelivery.columns) FROM webhook_delivery
            WHERE endpoint_id = \(endpoint) AND (CAST(\(state?.rawValue) AS TEXT) IS NULL OR state = \(state?.rawValue))
              AND coalesce(event_position, seq) < \(before)
            ORDER BY coalesce(event_position, seq) DESC LIMIT \(limit)
            """
        guard state != .failed else { return try await readRows(kept).map(WebhookDelivery.init) }
        let wanted = Self.wanted(by: found)
        let behind: SQLQuery = "(ev.stamp, ev.position) <= (\(cursorStamp), \(cursorPosition))"
        let side: SQLQuery =
            switch state {
            case .delivered: " AND \(behind)"
            case .pending: " AND NOT \(behind)"
            default: ""
            }
        return try await readRows(
            """
            SELECT * FROM (\(kept)) kept
            UNION ALL
            SELECT * FROM (
                SELECT ev.position, \(endpoint), ev.event_id, ev.type, ev.conversation_id, ev.created_at, ev.payload,
                    CASE WHEN \(behind) THEN 'delivered' ELSE 'pending' END, CASE WHEN \(behind) THEN 1 ELSE 0 END,
                    ev.created_at, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT),
                    ev.position
                FROM webhook_event ev
                WHERE ev.position < \(before) AND (ev.stamp, ev.position) > (\(startStamp), \(startPosition))
                  AND \(wanted)\(side)
                  AND NOT EXISTS (SELECT 1 FROM webhook_delivery d
                                  WHERE d.endpoint_id = \(endpoint) AND d.event_position = ev.position)
                ORDER BY ev.position DESC LIMIT \(limit)) logged
            ORDER BY 15 DESC LIMIT \(limit)
            """
        ).map(WebhookDelivery.init)
    }

    public func pendingWebhookDeliveries() async throws(StorageError) -> Int {
        // Parked deliveries waiting, and each endpoint's wanted events not yet handed over (a range of the log's order
        // index each).
        var pending = try await readRows("SELECT count(*) FROM webhook_delivery WHERE state = 'pending'").first?.int(0) ?? 0
        for row in try await readRows(
            "SELECT \(unescaped: WebhookEndpoint.columns), cursor_stamp, cursor_position FROM webhook_endpoint"
        ) {
            let endpoint = try WebhookEndpoint(row)
            pending += try await readRows(
                """
                SELECT count(*) FROM webhook_event ev
                WHERE (ev.stamp, ev.position)
                    > (\(try row.int64(WebhookEndpoint.columnCount)), \(try row.int64(WebhookEndpoint.columnCount + 1))) AND \(Self.wanted(by: endpoint))
                """
            ).first?.int(0) ?? 0
        }
        return pending
    }

    /// Whether a log event `ev` is of a type `endpoint` wants.
    static func wanted(by endpoint: WebhookEndpoint) -> SQLQuery {
        if let types = endpoint.events { "ev.type IN \(list: types.map(\.rawValue))" } else { "ev.type <> 'message.undelivered'" }
    }

    public func pruneWebhookDeliveries(before cutoff: Timestamp, limit: Int) async throws(StorageError) -> Int {
        // Each by its partial index: the pending rows, however many, are never scanned. The outer condition is
        // checked again on the rows deleted: a delivery retried meanwhile (pending again) stays.
        var pruned = 0
        for (state, column) in [("delivered", "delivered_at"), ("failed", "next_attempt_at")] where pruned < limit {
            pruned += try await writeRows(
                """
                DELETE FROM webhook_delivery WHERE seq IN (
                    SELECT seq FROM webhook_delivery WHERE state = '\(unescaped: state)' AND \(unescaped: column) < \(cutoff.rawValue)
                    LIMIT \(limit - pruned))
                AND state = '\(unescaped: state)' AND \(unescaped: column) < \(cutoff.rawValue)
                RETURNING seq
                """
            ).count
        }
        // The log's oldest events that every endpoint has passed: among the first `limit` in log order (the oldest
        // first, so the scan stops there), those older than the cutoff.
        let cursors = try await readRows("SELECT cursor_stamp, cursor_position FROM webhook_endpoint").map {
            row throws(StorageError) in WebhookCursor(stamp: try row.int64(0), position: try row.int64(1))
        }
        let passed = cursors.min() ?? WebhookCursor(stamp: Int64.max, position: Int64.max)
        if pruned < limit {
            pruned += try await writeRows(
                """
                DELETE FROM webhook_event WHERE position IN (
                    SELECT position FROM (
                        SELECT position, created_at FROM webhook_event
                        WHERE (stamp, position) <= (\(passed.stamp), \(passed.position))
                        ORDER BY stamp, position LIMIT \(limit - pruned)) oldest
                    WHERE created_at < \(cutoff.rawValue))
                RETURNING position
                """
            ).count
        }
        return pruned
    }
}

extension WebhookEndpoint {
    /// The columns ``init(_:)`` reads.
    public static let columns =
        "id, url, events, secret, previous_secret, previous_secret_expires_at, created_at, paused_at, batch_size"
    /// How many ``columns`` there are: what a query selects after them starts at this index.
    public static let columnCount = 9

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            id: try row.string(0),
            url: try row.string(1),
            events: WebhookEndpoint.events(fromFilter: try row.string(2)),
            secret: try row.string(3),
            previousSecret: try row.optionalString(4),
            previousSecretExpiresAt: try row.optionalInt64(5).map(Timestamp.init(milliseconds:)),
            createdAt: Timestamp(milliseconds: try row.int64(6)),
            pausedAt: try row.optionalInt64(7).map(Timestamp.init(milliseconds:)),
            batch: Int(try row.int64(8))
        )
    }
}

extension WebhookDelivery {
    /// The columns ``init(_:)`` reads.
    public static let columns = """
        seq, endpoint_id, event_id, type, conversation_id, created_at, payload, state, attempts, next_attempt_at,
        expires_at, last_status, last_error, delivered_at, coalesce(event_position, seq)
        """

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            seq: try row.int64(0),
            position: try row.int64(14),
            endpointID: try row.string(1),
            eventID: try row.string(2),
            type: WebhookEventType(rawValue: try row.string(3)),
            conversation: ConversationID(rawValue: try row.string(4)),
            createdAt: Timestamp(milliseconds: try row.int64(5)),
            payload: try row.string(6),
            state: WebhookDelivery.State(rawValue: try row.string(7)) ?? .pending,
            attempts: try row.int(8),
            nextAttemptAt: Timestamp(milliseconds: try row.int64(9)),
            expiresAt: try row.optionalInt64(10).map(Timestamp.init(milliseconds:)),
            lastStatus: try row.optionalInt(11),
            lastError: try row.optionalString(12),
            deliveredAt: try row.optionalInt64(13).map(Timestamp.init(milliseconds:))
        )
    }
}

extension WebhookEndpoint {
    /// SQL that holds when the endpoint row whose filter is the column `events` wants an event whose type is the SQL
    /// expression `type`: every type but `message.undelivered` for `*`, else the comma-separated types it names.
    /// Written once, in text both backends run (an event type holds no `%` or `_`).
    public static func wants(_ type: String, events: String = "events") -> String {
        "((\(events) = '*' AND \(type) <> 'message.undelivered') OR (',' || \(events) || ',') LIKE ('%,' || \(type) || ',%'))"
    }
}
