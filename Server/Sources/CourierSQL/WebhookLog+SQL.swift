// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// An endpoint's stream through the event log and its parked deliveries (ADRs 0030 and 0059), written once for every
/// backend that runs ``SQLQuery``s.
extension WebhookStore where Self: SQLRunner & ChangeStore {
    public func leaseWebhookStream(
        of endpoint: String,
        now: Timestamp,
        until: Timestamp,
        held: Timestamp?
    ) async throws(StorageError) -> WebhookStream? {
        try await writeRows(
            """
            UPDATE webhook_endpoint SET cursor_lease_until = \(until.rawValue)
            WHERE id = \(endpoint) AND paused_at IS NULL AND cursor_lease_until >= 0
              AND (cursor_lease_until <= \(now.rawValue) OR cursor_lease_until = \(held?.rawValue ?? -2))
            RETURNING \(unescaped: WebhookEndpoint.columns), cursor_stamp, cursor_position
            """
        ).first.map { row throws(StorageError) in
            WebhookStream(
                endpoint: try WebhookEndpoint(row),
                cursor: WebhookCursor(
                    stamp: try row.int64(WebhookEndpoint.columnCount),
                    position: try row.int64(WebhookEndpoint.columnCount + 1)
                )
            )
        }
    }

    public func webhookEvents(
        after cursor: WebhookCursor,
        limit: Int,
        maxBytes: Int
    ) async throws(StorageError) -> [WebhookEvent] {
        // Below the change cursor every transaction has ended: what the log holds there is all it will ever hold.
        // The first event always; then as many as fit `maxBytes` of payload (summed over the page only: the backlog
        // behind it is not read).
        let horizon = try await changeCursor().stamp
        return try await readRows(
            """
            SELECT \(unescaped: WebhookEvent.columns) FROM (
                SELECT \(unescaped: WebhookEvent.columns),
                    sum(length(payload)) OVER (ORDER BY stamp, position) - length(payload) AS before
                FROM (
                    SELECT \(unescaped: WebhookEvent.columns) FROM webhook_event
                    WHERE (stamp, position) > (\(cursor.stamp), \(cursor.position)) AND stamp < \(horizon)
                    ORDER BY stamp, position LIMIT \(limit)) page) sized
            WHERE before < \(maxBytes)
            ORDER BY stamp, position
            """
        ).map(WebhookEvent.init)
    }

    public func parkedWebhookQueues(
        of endpoint: String,
        among conversations: [ConversationID]
    ) async throws(StorageError) -> Set<ConversationID> {
        guard !conversations.isEmpty else { return [] }
        return Set(
            try await readRows(
                """
                SELECT DISTINCT conversation_id FROM webhook_delivery
                WHERE endpoint_id = \(endpoint) AND state = 'pending'
                  AND conversation_id IN \(list: conversations.map(\.rawValue))
                """
            ).map { row throws(StorageError) in ConversationID(rawValue: try row.string(0)) }
        )
    }

    public func dueWebhookDeliveries(
        of endpoint: String,
        now: Timestamp,
        limit: Int,
        runLength: Int
    ) async throws(StorageError) -> (runs: [[WebhookDelivery]], next: Timestamp?) {
        let heads = try await readRows(WebhookDelivery.queueHeads(of: endpoint, limit: limit + 1)).map {
            row throws(StorageError) in (conversation: try row.string(0), dueAt: try row.int64(1))
        }
        let due = heads.prefix { $0.dueAt <= now.rawValue }.prefix(limit)
        var runs: [[WebhookDelivery]] = []
        for head in due {
            // Each run is the due prefix of its queue's oldest deliveries: it starts at the head and has no gap.
            let queue = try await readRows(
                """
                SELECT \(unescaped: WebhookDelivery.columns) FROM webhook_delivery
                WHERE endpoint_id = \(endpoint) AND conversation_id = \(head.conversation) AND state = 'pending'
                ORDER BY seq LIMIT \(max(1, runLength))
                """
            ).map(WebhookDelivery.init)
            let run = Array(queue.prefix { $0.nextAttemptAt <= now })
            if !run.isEmpty { runs.append(run) }
        }
        let next: Timestamp? =
            if heads.count > due.count { Timestamp(milliseconds: max(now.rawValue, heads[due.count].dueAt)) }
            else { nil }
        return (runs, next)
    }

    public func advanceWebhookStream(
        of endpoint: String,
        lease: Timestamp,
        to cursor: WebhookCursor,
        parking: [WebhookParking],
        attempts: [WebhookAttempt],
        answeredAt: Timestamp?,
        leaseAfter: Timestamp
    ) async throws(StorageError) -> Bool {
        // Nothing to park, record or wake: one statement.
        if parking.isEmpty && attempts.isEmpty && answeredAt == nil {
            return try await !writeRows(
                """
                UPDATE webhook_endpoint SET cursor_stamp = \(cursor.stamp), cursor_position = \(cursor.position),
                    cursor_lease_until = \(leaseAfter.rawValue)
                WHERE id = \(endpoint) AND cursor_lease_until = \(lease.rawValue) RETURNING id
                """
            ).isEmpty
        }
        // The lease is taken over for this transaction (-1, which no lease has and the last statement undoes), so the
        // parked deliveries are written only if this node still held the stream; under a lease another node took over,
        // nothing is written and the events are its to hand over (what this node sent were repeats).
        let held: SQLQuery = "SELECT 1 FROM webhook_endpoint WHERE id = \(endpoint) AND cursor_lease_until = -1"
        var queries: [SQLQuery] = [
            """
            UPDATE webhook_endpoint SET cursor_lease_until = -1
            WHERE id = \(endpoint) AND cursor_lease_until = \(lease.rawValue) RETURNING id
            """
        ]
        // The endpoint answered: its parked deliveries waiting out a backoff are due now (before this write's own
        // outcomes and parked deliveries, which keep theirs).
        if let answeredAt {
            queries.append(WebhookDelivery.dueAfterSuccess(of: endpoint, at: answeredAt) + " AND EXISTS (\(held))")
        }
        // Each attempt's outcome, one statement for the neighbours that came to the same (a batch's events share their
        // answer and its time: after an outage, a statement a request, not one an event); one not attempted on purpose
        // (`message.undelivered` before its moment) only moves its next attempt. A delivery a recall erased meanwhile
        // is gone, and stays gone.
        for (attempt, group) in alike(attempts, by: { [AnyHashable($0.outcome), $0.status, $0.error, $0.at] }) {
            var update: SQLQuery
            switch attempt.outcome {
            case .deferred(let until):
                update = "UPDATE webhook_delivery SET next_attempt_at = \(until.rawValue)"
            case .delivered:
                update = """
                    UPDATE webhook_delivery SET state = 'delivered', attempts = attempts + 1, last_status = \(attempt.status),
                        last_error = NULL, delivered_at = \(attempt.at.rawValue)
                    """
            case .retry(let at):
                update = """
                    UPDATE webhook_delivery SET attempts = attempts + 1, last_status = \(attempt.status),
                        last_error = \(attempt.error), next_attempt_at = \(at.rawValue)
                    """
            case .failed:
                update = """
                    UPDATE webhook_delivery SET state = 'failed', attempts = attempts + 1, last_status = \(attempt.status),
                        last_error = \(attempt.error)
                    """
            }
            queries.append(update + " WHERE seq IN \(list: group.map(\.seq)) AND state = 'pending' AND EXISTS (\(held))")
        }
        // Copied from the log as it is now: an event a recall erased meanwhile is not brought back, and a quote it
        // cut stays cut. The events parked alike (those waiting behind one not accepted) are one statement, copied in
        // the log's order, which is their queue's (`seq`): SQLite numbers rows in the order the SELECT yields them;
        // PostgreSQL does too, since a subquery with ORDER BY is not pulled up and the column default (`nextval`) is
        // computed above its sort. That is how its planner works, not a documented promise; the in-order tests of
        // both backends (WebhookBatchTests, WebhookTests) park several events alike and check their order.
        let parkedAlike = alike(parking) {
            [AnyHashable($0.state), $0.attempts, $0.nextAttemptAt, $0.lastStatus, $0.lastError]
        }
        for (parked, events) in parkedAlike {
            queries.append(
                """
                INSERT INTO webhook_delivery (endpoint_id, event_id, type, conversation_id, created_at, payload,
                    next_attempt_at, state, attempts, last_status, last_error, event_position)
                SELECT \(endpoint), event_id, type, conversation_id, created_at, payload,
                    \(parked.nextAttemptAt.rawValue), \(parked.state.rawValue), \(parked.attempts), \(parked.lastStatus),
                    \(parked.lastError), position
                FROM webhook_event WHERE position IN \(list: events.map(\.event.position)) AND EXISTS (\(held))
                ORDER BY stamp, position
                """
            )
        }
        queries.append(
            """
            UPDATE webhook_endpoint SET cursor_stamp = \(cursor.stamp), cursor_position = \(cursor.position),
                cursor_lease_until = \(leaseAfter.rawValue)
            WHERE id = \(endpoint) AND cursor_lease_until = -1
            """
        )
        return try await !writeRows(queries)[0].isEmpty
    }

    /// Where a new endpoint starts: after every event committed so far.
    func startingCursor() async throws(StorageError) -> WebhookCursor {
        WebhookCursor(stamp: try await changeCursor().stamp - 1, position: Int64.max)
    }
}

extension WebhookDelivery {
    /// The endpoint's queues (a conversation each) with pending deliveries, as their heads' conversation and next
    /// attempt, the soonest first: walked one index seek each (a loose index scan of the partial queue index: the
    /// endpoint's next conversation with pending deliveries), so a look costs the number of queues, not the backlog:
    /// grouping every pending row took 5.5 ms with 40,000 waiting, the walk 0.2 ms (docs/benchmarks-history.md).
    /// Usually nothing is parked: one seek.
    public static func queueHeads(of endpoint: String, limit: Int) -> SQLQuery {
        """
        WITH RECURSIVE queue(conversation_id) AS (
            SELECT (SELECT min(conversation_id) FROM webhook_delivery
                    WHERE state = 'pending' AND endpoint_id = \(endpoint))
            UNION ALL
            SELECT (SELECT min(conversation_id) FROM webhook_delivery
                    WHERE state = 'pending' AND endpoint_id = \(endpoint) AND conversation_id > q.conversation_id)
            FROM queue q WHERE q.conversation_id IS NOT NULL
        )
        SELECT d.conversation_id, d.next_attempt_at FROM queue q
        JOIN webhook_delivery d ON d.seq = (
            SELECT min(seq) FROM webhook_delivery
            WHERE state = 'pending' AND endpoint_id = \(endpoint) AND conversation_id = q.conversation_id)
        WHERE q.conversation_id IS NOT NULL
        ORDER BY d.next_attempt_at, d.seq LIMIT \(limit)
        """
    }

    /// Makes the endpoint's deliveries waiting out a backoff due at `time`: found among the few in backoff (the
    /// partial index of pending ones), never by the endpoint's history (left to itself SQLite's planner took the
    /// endpoint's index and read every delivery it ever had, delivered ones included: 12 % of the server's CPU in
    /// `courier-bench direct --webhooks`, and growing with the retained history).
    public static func dueAfterSuccess(of endpoint: String, at time: Timestamp) -> SQLQuery {
        """
        UPDATE webhook_delivery SET next_attempt_at = \(time.rawValue)
        WHERE seq IN (SELECT seq FROM webhook_delivery
                      WHERE state = 'pending' AND attempts > 0 AND next_attempt_at > \(time.rawValue))
          AND endpoint_id = \(endpoint)
        """
    }
}

extension WebhookEvent {
    /// The columns ``init(_:)`` reads.
    public static let columns = "position, stamp, event_id, type, conversation_id, created_at, payload"

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            position: try row.int64(0),
            stamp: try row.int64(1),
            id: try row.string(2),
            type: WebhookEventType(rawValue: try row.string(3)),
            conversation: ConversationID(rawValue: try row.string(4)),
            createdAt: Timestamp(milliseconds: try row.int64(5)),
            payload: try row.string(6)
        )
    }
}

/// `items` in runs of neighbours with the same `key`, in order, each as its first item and all of its items.
private func alike<Item>(_ items: [Item], by key: (Item) -> [AnyHashable]) -> [(first: Item, items: [Item])] {
    var groups: [(first: Item, items: [Item])] = []
    var last: [AnyHashable]?
    for item in items {
        let itemKey = key(item)
        if itemKey == last { groups[groups.count - 1].items.append(item) } else { groups.append((item, [item])) }
        last = itemKey
    }
    return groups
}
