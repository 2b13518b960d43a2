// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A message in a direct chat that exists, written with the other devices' messages of the moment: what arrives
    /// while a batch is under way goes into the next one, and a batch is one statement that commits on its own (one
    /// round trip and one commit for many devices instead of one each, ADR 0035). Each entry, its change, its webhook
    /// events and its notification are built before the statement, at the seq after its conversation's head as this
    /// node last knew it (``knownHeads``, read when not known), and the statement writes them only if that is still
    /// the head's next seq (ADR 0057): nothing built is patched. Its outcome, or `.notTaken` for anything else — a
    /// first message, a stored duplicate, an earlier time, a conversation whose row another transaction holds, a
    /// recall, a reply, an entry not announced to everyone — or `.failed` for a batch that failed (a lost uniqueness
    /// race, a lost connection), which then take ``appendOnce(_:recallRules:editRules:)``.
    func appendDirectMessage(_ draft: MessageDraft) async -> BatchOutcome<AppendOutcome> {
        guard let append = DirectAppend(draft) else { return .notTaken }
        return await directAppends.submit(append, run: { batch in await self.appendDirectMessages(batch) })
    }

    /// What a batch did with one of its inputs.
    enum BatchOutcome<Value: Sendable>: Sendable {
        /// Written, with what the batch tells of it.
        case done(Value)
        /// Not for a batch, or left alone by it: nothing of it was written.
        case notTaken
        /// The batch failed: most likely nothing was written, but a commit may have lost its answer.
        case failed
        /// The database could not be reached (``StorageError/unreachable(_:)``): the request is answered so at once,
        /// not tried again alone (which would wait for the database a second time).
        case unreachable(String)

        var isDone: Bool {
            if case .done = self { true } else { false }
        }
    }

    /// Runs one batch: each append's outcome, or why it has none. An append planned at a head this node knew and
    /// left alone by the statement (another node or path moved the head) is planned again from the head read now,
    /// once.
    func appendDirectMessages(_ batch: [DirectAppend]) async -> [BatchOutcome<AppendOutcome>] {
        let started = ContinuousClock.now
        var outcomes = [BatchOutcome<AppendOutcome>](repeating: .notTaken, count: batch.count)
        var pending = Array(batch.indices)
        var written = 0
        do {
            for attempt in 0..<2 where !pending.isEmpty {
                let conversations = pending.map { batch[$0].draft.conversation.rawValue }
                // First the heads this node remembers; on the second attempt, each read anew.
                var heads: [(String, Int64)] = []
                if attempt == 0 {
                    heads = knownHeads.withLock { known in conversations.compactMap { id in known[id].map { (id, $0) } } }
                }
                let known = Set(heads.map(\.0))
                let unknown = conversations.filter { !known.contains($0) }
                if !unknown.isEmpty { heads += try await readHeads(of: unknown) }
                let head = Dictionary(heads, uniquingKeysWith: { first, _ in first })
                var planned: [(number: Int, outcome: AppendOutcome)] = []
                for index in pending {
                    guard let last = head[batch[index].draft.conversation.rawValue] else { continue }
                    let message = batch[index].draft.message(at: Seq(last + 1))
                    planned.append((index + 1, AppendOutcome(appended: message, membershipSeq: nil, announcement: .everyone)))
                }
                guard !planned.isEmpty else { break }
                let bindings = try bindings(batch, planned)
                let numbers = try await withPooledConnection { [logger] connection in
                    try await connection.run(AppendDirectMessages.self, bindings, logger: logger).map {
                        try $0.decode((Int, Int64).self).0
                    }
                }
                let taken = Set(numbers)
                knownHeads.withLock { known in
                    if known.count > Self.maxKnownHeads { known.removeAll() }
                    for (number, outcome) in planned where taken.contains(number) {
                        known[outcome.message.conversation.rawValue] = outcome.message.seq.rawValue
                        outcomes[number - 1] = .done(outcome)
                    }
                }
                written += taken.count
                // Again only what was planned at a head this node remembered: one read just now will not be newer.
                pending = planned.map { $0.number - 1 }.filter {
                    !taken.contains($0 + 1) && known.contains(batch[$0].draft.conversation.rawValue)
                }
            }
        } catch .unreachable(let reason) {
            return batch.indices.map { outcomes[$0].isDone ? outcomes[$0] : .unreachable(reason) }
        } catch {
            return batch.indices.map { outcomes[$0].isDone ? outcomes[$0] : .failed }
        }
        if written > 0 { commits.record(operations: written, duration: ContinuousClock.now - started) }
        return outcomes
    }

    /// The most conversations ``knownHeads`` remembers: past it, it starts again empty.
    static let maxKnownHeads = 100_000

    /// The last seq of each of `conversations` that exists.
    private func readHeads(of conversations: [String]) async throws(StorageError) -> [(String, Int64)] {
        let heads = try await withPooledConnection { [logger] connection in
            try await connection.run(DirectHeads.self, .of(conversations), logger: logger).map {
                try $0.decode((String, Int64).self)
            }
        }
        knownHeads.withLock { known in for (id, last) in heads { known[id] = last } }
        return heads
    }

    /// The statement's arguments: the planned appends' columns (`$1`–`$13`: `$12` the seq each is written at, `$13`
    /// its number in the batch, from 1), their webhook events (`$14`–`$19`: the append each belongs to, then the
    /// event's columns), the notification channel (`$20`) and the notifications (`$21`–`$22`: the append, the payload).
    private func bindings(
        _ batch: [DirectAppend],
        _ planned: [(number: Int, outcome: AppendOutcome)]
    ) throws(StorageError) -> PostgresBindings {
        let appends = planned.map { (batch[$0.number - 1], $0.outcome) }
        var bindings = PostgresBindings()
        bindings.append(appends.map(\.0.draft.time.rawValue))
        bindings.append(appends.map(\.0.draft.conversation.rawValue))
        bindings.append(appends.map(\.0.draft.id.rawValue))
        bindings.append(appends.map(\.0.draft.sender.rawValue))
        bindings.append(appends.map(\.0.draft.clientID.rawValue))
        bindings.append(appends.map(\.0.draft.body))
        bindings.append(appends.map(\.0.draft.countsAsUnread))
        bindings.append(appends.map(\.0.draft.needsReadReceipt))
        bindings.append(appends.map { $0.0.draft.type ?? "" })
        bindings.append(appends.map { $0.0.draft.type == nil })
        bindings.append(appends.map(\.0.ext))
        bindings.append(appends.map(\.1.message.seq.rawValue))
        bindings.append(planned.map { Int64($0.number) })
        var events: [(Int64, WebhookEventDraft)] = []
        var notifications: [(Int64, String)] = []
        for (number, outcome) in planned {
            guard let change = outcome.change else { continue }
            events += change.webhookEvents.map { (Int64(number), $0) }
            do {
                notifications += try notificationPayloads(change).map { (Int64(number), $0) }
            } catch {
                throw .failed(String(reflecting: error))
            }
        }
        bindings.append(events.map(\.0))
        bindings.append(events.map(\.1.id))
        bindings.append(events.map(\.1.type.rawValue))
        bindings.append(events.map(\.1.conversation.rawValue))
        bindings.append(events.map(\.1.time.rawValue))
        bindings.append(events.map(\.1.payload))
        bindings.append(Self.channel)
        bindings.append(notifications.map(\.0))
        bindings.append(notifications.map(\.1))
        return bindings
    }

    /// An append the batched statement takes. The entry keeps the draft's time, so the statement takes only an append
    /// whose time does not go back.
    struct DirectAppend: Sendable {
        let draft: MessageDraft
        /// The entry's `ext` as stored, `""` for none (never what an `ext` is stored as: that is a JSON object).
        let ext: String

        init?(_ draft: MessageDraft) {
            // A reply decides its quote under the conversation's lock (``ReplyQuote``): not in a batch.
            guard draft.conversation.kind == .direct, draft.recall == nil, draft.edit == nil, draft.replyTo == nil,
                draft.quote == nil, draft.group == nil, draft.receiptRequest == nil, draft.announcement == .everyone,
                let ext = try? (EntryJSON.encode(draft.ext) ?? "")
            else { return nil }
            self.draft = draft
            self.ext = ext
        }

        /// Two appends share no batch when they append to one conversation (one statement moves a conversation's
        /// head once) or carry one `(sender, clientId)` (the second is the first's retry).
        static func apart(_ one: DirectAppend, _ other: DirectAppend) -> Bool {
            one.draft.conversation == other.draft.conversation
                || (one.draft.sender == other.draft.sender && one.draft.clientID == other.draft.clientID)
        }
    }

    /// The most operations in one batch (of messages, deliveries or reads).
    static let maxBatch = 64
    /// The most batches of one kind under way at once: a batch waiting for a lock (a retry's first attempt not yet
    /// committed) holds up only the operations in it.
    static let batchesAtOnce = 2

    /// The heads of the batch's conversations (`$1`): each one's last seq.
    enum DirectHeads: HotStatement {
        static let sql = "SELECT id, last_seq FROM conversation WHERE id = ANY($1::text[])"
    }

    /// The batch's appends, each written at the seq it was planned at after the head read, with its webhook events
    /// and notifications (``bindings(_:_:)``), all or nothing per append. Returns the number of each append written. The
    /// statement locks the conversations' rows as an append's update does (`FOR NO KEY UPDATE`), skipping those
    /// another transaction holds when it reaches them (`SKIP LOCKED`): it does not lock rows in an order, so it must
    /// not wait for them. It can still wait — for an insert of the same `(sender, clientId)` not yet committed, and in
    /// this project's tests now and then for a held row — which is why two batches run at once (``batchesAtOnce``).
    enum AppendDirectMessages: HotStatement {
        static let sql = """
            WITH draft AS (
                SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::bool[], $8::bool[], $9::text[], $10::bool[], $11::text[], $12::int8[], $13::int8[])
                    AS d(time, conversation_id, id, sender, client_id, body, counts_unread, needs_receipt, type,
                        no_type, ext, seq, n)
            ), locked AS MATERIALIZED (
                SELECT c.id FROM conversation c WHERE c.id = ANY($2::text[]) FOR NO KEY UPDATE SKIP LOCKED
            ), head AS (
                UPDATE conversation c SET last_seq = d.seq, last_time = d.time,
                    stamp = GREATEST(change_stamp(), c.stamp)
                FROM locked l JOIN draft d ON d.conversation_id = l.id
                WHERE c.id = l.id AND c.last_seq = d.seq - 1 AND c.last_time <= d.time
                    AND NOT EXISTS (SELECT 1 FROM message m WHERE m.sender = d.sender AND m.client_id = d.client_id)
                RETURNING d.n, c.stamp
            ), entry AS (
                INSERT INTO message
                    (conversation_id, seq, id, sender, client_id, time, \(MessageDraft.rowColumns), stamp)
                SELECT d.conversation_id, d.seq, d.id, d.sender, d.client_id, d.time, \(rowFromDraft), change_stamp()
                FROM head h JOIN draft d ON d.n = h.n
                RETURNING seq
            ), recorded AS (
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT h.stamp, v.event_id, v.type, v.conversation_id, d.id, v.created_at, v.payload
                FROM unnest($14::int8[], $15::text[], $16::text[], $17::text[], $18::int8[], $19::text[])
                    WITH ORDINALITY AS v(append, event_id, type, conversation_id, created_at, payload, k)
                JOIN head h ON h.n = v.append JOIN draft d ON d.n = v.append
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint e WHERE \(endpointWants("v.type")))
                ORDER BY v.k
            ), told AS (
                SELECT pg_notify($20, p.payload)
                FROM unnest($21::int8[], $22::text[]) WITH ORDINALITY AS p(append, payload, k)
                JOIN head h ON h.n = p.append
            )
            SELECT h.n, (SELECT count(*) FROM told) + (SELECT count(*) FROM entry) FROM head h
            """

        /// The row's columns (``MessageDraft/rowColumns``) from the batch's arrays. A message the batch takes has no
        /// reply, quote, recall, group change, receipt request or edit (``DirectAppend``): those are `NULL`. Arrays
        /// bound from Swift hold no `NULL`, so a draft without a type or an ext sends a flag or `''`.
        static let rowFromDraft = MessageDraft.rowColumnNames.map { column in
            [
                "body": "d.body", "counts_unread": "d.counts_unread", "needs_receipt": "d.needs_receipt",
                "type": "CASE WHEN d.no_type THEN NULL ELSE d.type END", "ext": "NULLIF(d.ext, '')",
            ][column] ?? "NULL"
        }.joined(separator: ", ")
    }
}
