// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
public import CourierWire
internal import PostgresNIO

extension PostgresStore: ConversationStore {}

extension PostgresStore: ReceiptStore {
    public func advanceDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    )
        async throws(StorageError) -> DeliveryOutcome
    {
        if conversation.kind == .direct, seq > .zero {
            return try await advanceDirectDelivered(account, in: conversation, to: seq, at: now)
        }
        return try await advanceDeliveredInTransaction(account, in: conversation, to: seq, at: now)
    }
}

extension PostgresStore {
    /// A delivery in a transaction of its own: a group's (which holds the group's row), a delivery at seq 0, and a
    /// direct chat's whose batch failed.
    func advanceDeliveredInTransaction(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    ) async throws(StorageError) -> DeliveryOutcome {
        try await transaction { connection in
            // A group delivery holds the group's row shared, as a read does: a removal cannot commit between the
            // membership check and the receipt write (which would leave a receipt row for a non-member).
            let isGroup = conversation.kind == .group
            let bindings = try PostgresBindings.of(conversation.rawValue, seq.rawValue)
            let head =
                isGroup
                ? try await connection.run(DeliveryHeadInGroup.self, bindings, logger: logger).first
                : try await connection.run(DeliveryHead.self, bindings, logger: logger).first
            guard let head else { throw StorageError.conversationNotFound(conversation) }
            let (lastSeq, storedTime) = try head.decode((Int64, Int64?).self)
            if isGroup, try await memberRow(account, of: conversation, on: connection) == nil {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            guard seq.rawValue <= lastSeq else { throw StorageError.seqBeyondLastMessage(last: Seq(lastSeq)) }
            // The entry's time, read with the head; one that committed while the head waited for the group's lock is
            // not in that statement's snapshot, so it is read again.
            var time = storedTime ?? 0
            if storedTime == nil, seq > .zero {
                time = try await self.time(of: seq, in: conversation.rawValue, on: connection)
            }
            // The invariant lives in SQL: the watermark only moves forward (concurrent receipts converge on the max).
            let moved = try await connection.run(
                AdvanceDelivered.self,
                .of(conversation.rawValue, account.rawValue, seq.rawValue, time, now.rawValue),
                logger: logger
            ).first
            let outcome =
                if let moved {
                    DeliveryOutcome(
                        account, in: conversation, watermark: try Self.watermark(moved), advanced: seq > .zero, at: now
                    )
                } else {
                    DeliveryOutcome(
                        account, in: conversation,
                        watermark: try await deliveredWatermark(of: account, in: conversation, on: connection),
                        advanced: false, at: now
                    )
                }
            try await announce(outcome.change, on: connection)
            return outcome
        }
    }
}

extension PostgresStore {
    /// A delivery in a direct chat: the head read on its own (nothing to hold: a direct chat has no membership to
    /// change), then the watermark, its notification and its webhook event written with the other devices' deliveries
    /// of the moment, one statement per batch that commits on its own (ADR 0035). A batch that fails takes the
    /// transaction every delivery can take.
    func advanceDirectDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    ) async throws(StorageError) -> DeliveryOutcome {
        let head = try await withPooledConnection { connection in
            try await connection.run(DeliveryHead.self, .of(conversation.rawValue, seq.rawValue), logger: logger)
                .first.map { try $0.decode((Int64, Int64?).self) }
        }
        guard let (lastSeq, storedTime) = head else { throw .conversationNotFound(conversation) }
        guard seq.rawValue <= lastSeq else { throw .seqBeyondLastMessage(last: Seq(lastSeq)) }
        let moved = DeliveryOutcome(
            account, in: conversation, watermark: Watermark(seq: seq, time: Timestamp(milliseconds: storedTime ?? 0)),
            advanced: true, at: now
        )
        // The watermark the batch writes if it takes the delivery (it writes nothing else): its change is whole.
        guard let change = moved.change else { throw .failed("A moved watermark has its change.") }
        let notification: String
        do {
            notification = try notificationPayloads(change).first ?? ""
        } catch {
            throw .failed(String(reflecting: error))
        }
        let delivery = DirectDelivery(
            conversation: conversation, account: account, watermark: moved.watermark, at: now,
            event: change.webhookEvents.first, notification: notification
        )
        switch await directDeliveries.submit(delivery, run: { batch in await self.deliverDirect(batch) }) {
        case .done: return moved
        case .unreachable(let reason): throw .unreachable(reason)
        case .notTaken:
            let watermark = try await withPooledConnection { connection in
                try await deliveredWatermark(of: account, in: conversation, on: connection)
            }
            return DeliveryOutcome(account, in: conversation, watermark: watermark, advanced: false, at: now)
        case .failed:
            // Most likely nothing was written. But a statement can commit and lose its answer: a watermark found at
            // this very seq is reported as moved (a watermark told twice is harmless; one never told is a loss).
            let outcome = try await advanceDeliveredInTransaction(account, in: conversation, to: seq, at: now)
            guard !outcome.advanced, outcome.watermark.seq == seq else { return outcome }
            return DeliveryOutcome(account, in: conversation, watermark: outcome.watermark, advanced: true, at: now)
        }
    }

    /// A delivery in a direct chat as a batch takes it, with what it tells others, written beforehand.
    struct DirectDelivery: Sendable {
        let conversation: ConversationID
        let account: AccountID
        let watermark: Watermark
        let at: Timestamp
        let event: WebhookEventDraft?
        /// Its notification to the other nodes, `""` for none.
        let notification: String

        /// One statement moves a receipt row once: two deliveries of one account in one conversation share no batch.
        static func apart(_ one: DirectDelivery, _ other: DirectDelivery) -> Bool {
            one.conversation == other.conversation && one.account == other.account
        }
    }

    /// Runs one batch of deliveries: `.done` for each that moved its watermark, `.notTaken` for one that did not
    /// (stale or equal: the watermark was there already), `.failed` for all when the statement failed.
    func deliverDirect(_ unordered: [DirectDelivery]) async -> [BatchOutcome<Void>] {
        // Receipt rows are locked in one order by every batch (``lockOrder(_:_:)``, as reads lock them).
        let order = unordered.indices.sorted {
            Self.lockOrder(unordered[$0].account, unordered[$0].conversation)
                < Self.lockOrder(unordered[$1].account, unordered[$1].conversation)
        }
        let batch = order.map { unordered[$0] }
        var bindings = PostgresBindings()
        bindings.append(batch.map(\.conversation.rawValue))
        bindings.append(batch.map(\.account.rawValue))
        bindings.append(batch.map(\.watermark.seq.rawValue))
        bindings.append(batch.map(\.watermark.time.rawValue))
        bindings.append(batch.map(\.at.rawValue))
        bindings.append(batch.map { $0.event?.id ?? "" })
        bindings.append(batch.map { $0.event?.type.rawValue ?? "" })
        bindings.append(batch.map { $0.event?.time.rawValue ?? 0 })
        bindings.append(batch.map { $0.event?.payload ?? "" })
        bindings.append(batch.map(\.notification))
        bindings.append(Self.channel)
        let started = ContinuousClock.now
        let moved: [Int64]
        do {
            moved = try await withPooledConnection { [bindings] connection in
                try await connection.run(DeliverDirect.self, bindings, logger: logger).map {
                    try $0.decode((Int64, Int64).self).0
                }
            }
        } catch .unreachable(let reason) {
            return unordered.map { _ in .unreachable(reason) }
        } catch {
            return unordered.map { _ in .failed }
        }
        if !moved.isEmpty { commits.record(operations: moved.count, duration: ContinuousClock.now - started) }
        var outcomes = [BatchOutcome<Void>](repeating: .notTaken, count: batch.count)
        for number in moved where number >= 1 && number <= batch.count { outcomes[order[Int(number) - 1]] = .done(()) }
        return outcomes
    }

    /// Where an account's delivery watermark is, for a delivery that did not move it: read after its upsert, which
    /// waited for the row lock of any delivery that did.
    func deliveredWatermark(
        of account: AccountID,
        in conversation: ConversationID,
        on connection: PostgresConnection
    ) async throws -> Watermark {
        let row = try await connection.run(
            DeliveredWatermark.self,
            .of(conversation.rawValue, account.rawValue),
            logger: logger
        ).first
        return try row.map(Self.watermark) ?? Watermark(seq: .zero, time: Timestamp(milliseconds: 0))
    }

    /// A `(seq, time)` row as a watermark.
    static func watermark(_ row: PostgresRow) throws -> Watermark {
        let (seq, time) = try row.decode((Int64, Int64).self)
        return Watermark(seq: Seq(seq), time: Timestamp(milliseconds: time))
    }

    enum DeliveredWatermark: HotStatement {
        static let sql = "SELECT delivered_seq, delivered_time FROM receipt WHERE conversation_id = $1 AND account = $2"
    }

    /// A batch of direct deliveries (`$1`–`$10`: one array per column — conversation, account, seq, time, when, the
    /// webhook event's id, type, time and payload (`""` for none), the notification (`""` for none); `$11` the channel)
    /// in one statement: each watermark moved forward as ``AdvanceDelivered`` moves it, and for each that moved its
    /// event and its notification. Returns the number (from 1) of each delivery that moved.
    enum DeliverDirect: HotStatement {
        static let sql = """
            WITH d AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::text[], $7::text[],
                    $8::int8[], $9::text[], $10::text[])
                    WITH ORDINALITY AS d(conversation_id, account, seq, time, at, event_id, event_type, event_time,
                        payload, notification, n)
            ), moved AS (
                INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, delivered_at, stamp)
                SELECT conversation_id, account, seq, time, at, change_stamp() FROM d ORDER BY n
                \(advancing)
                RETURNING conversation_id, account
            ), moved_delivery AS (
                SELECT d.* FROM moved JOIN d ON d.conversation_id = moved.conversation_id AND d.account = moved.account
            ), recorded AS (
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, created_at, payload)
                SELECT change_stamp(), event_id, event_type, conversation_id, event_time, payload FROM moved_delivery
                WHERE event_id <> '' AND EXISTS (SELECT 1 FROM webhook_endpoint e WHERE \(endpointWants("event_type")))
                ORDER BY n
            ), told AS (
                SELECT pg_notify($11, notification) FROM moved_delivery WHERE notification <> ''
            )
            SELECT n, (SELECT count(*) FROM told) FROM moved_delivery
            """
    }

    /// A conversation's last seq and the time of the entry at `$2` (NULL when there is none).
    enum DeliveryHead: HotStatement {
        static let sql = """
            SELECT c.last_seq, (SELECT m.time FROM message m WHERE m.conversation_id = c.id AND m.seq = $2)
            FROM conversation c WHERE c.id = $1
            """
    }

    /// ``DeliveryHead`` holding a group's row shared, as a read does: a removal cannot commit between the membership
    /// check and the receipt write (which would leave a receipt row for a non-member).
    enum DeliveryHeadInGroup: HotStatement {
        static let sql = DeliveryHead.sql + " FOR SHARE OF c"
    }

    /// Moves an account's delivered watermark forward, never back; returns it only when it moved.
    enum AdvanceDelivered: HotStatement {
        static let sql = """
            INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, delivered_at, stamp)
            VALUES ($1, $2, $3, $4, $5, change_stamp())
            \(advancing)
            RETURNING delivered_seq, delivered_time
            """
    }

    /// The upsert of a delivery's receipt row: the watermark only moves forward (concurrent receipts converge on the
    /// highest).
    static let advancing = """
        ON CONFLICT (conversation_id, account) DO UPDATE
        SET delivered_seq = EXCLUDED.delivered_seq, delivered_time = EXCLUDED.delivered_time,
            delivered_at = EXCLUDED.delivered_at, stamp = EXCLUDED.stamp
        WHERE receipt.delivered_seq < EXCLUDED.delivered_seq
        """
}

extension PostgresStore: ChangeStore {
    public func changeCursor() async throws(StorageError) -> ChangeCursor {
        try await withPooledConnection { connection in
            // The oldest transaction of this database still running — every stamp below it is committed (or rolled
            // back) and visible to the reads that follow; one that took its stamp earlier and commits later is at or
            // above it — or, with none running, the next id to be assigned. Transactions are cluster-wide: those of
            // other databases on the server (whose writes are not ours) are left out, so a long one there does not
            // hold our cursors back. First the snapshot, then which of its running transactions are this database's
            // (one still listed is still running; one no longer listed has finished, before the reads that follow).
            let snapshot = try await connection.query("SELECT pg_current_snapshot()::text", logger: logger)
                .decode(String.self).first { _ in true } ?? ""
            // The database's identity (ADR 0044) is `store_id`, the oid `change_clock` has in this database and the
            // timeline PostgreSQL writes: `pg_restore` (or `pg_dump | psql`) creates the table anew, with another oid,
            // and a point-in-time recovery or a promoted standby writes on a new timeline, so a cursor handed out by
            // the database before it is refused and no device keeps a history the database forked from.
            let row = try await connection.query(
                """
                SELECT c.store_id || '-' || 'change_clock'::regclass::oid::text || '-' || CASE WHEN pg_is_in_recovery()
                    THEN 'standby' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END, COALESCE((
                    SELECT min(x::text::bigint) FROM pg_snapshot_xip(\(snapshot)::pg_snapshot) x
                    WHERE x::text::bigint % 4294967296 IN (
                        SELECT backend_xid::text::bigint FROM pg_stat_activity
                        WHERE datname = current_database() AND backend_xid IS NOT NULL)
                ), pg_snapshot_xmax(\(snapshot)::pg_snapshot)::text::bigint)
                FROM change_clock c
                """,
                logger: logger
            ).decode((String, Int64).self).first { _ in true }
            guard let (storeID, stamp) = row else { throw StorageError.failed("change_clock is empty") }
            noticeIdentity(storeID)
            return ChangeCursor(storeID: storeID, stamp: stamp)
        }
    }

}

extension PostgresStore {
    /// Logs, once per change, that the database this node reads is not the one it read before: restored from a dump
    /// or a backup, or a standby promoted (ADR 0044). Devices start over at their next sync; nothing else changes.
    func noticeIdentity(_ identity: String) {
        let previous = knownIdentity.withLock { known in
            defer { known = identity }
            return known
        }
        guard let previous, previous != identity else { return }
        logger.warning(
            "The database's identity changed: it was restored, or a standby was promoted. Devices start over at their next sync (sync.cursorInvalid)",
            metadata: ["store.identity.from": "\(previous)", "store.identity.to": "\(identity)"]
        )
    }
}
