// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A message in a direct chat that exists, written with the other devices' messages of the moment: what arrives
    /// while a batch is under way goes into the next one, and a batch is one statement that commits on its own (one
    /// round trip and one commit for many devices instead of one each, ADR 0035): the entries, their notifications and
    /// their webhook deliveries. Its seq, or `.notTaken` for anything else — a first message, a stored duplicate, an
    /// earlier time, a conversation whose row another transaction holds, a recall, a reply, an entry not announced to
    /// everyone — or `.failed` for a batch that failed (a lost uniqueness race, a lost connection), which then take
    /// ``appendOnce(_:recallRules:)``.
    func appendDirectMessage(_ draft: MessageDraft) async -> BatchOutcome<Int64> {
        guard let append = DirectAppend(draft, notificationPayloads: { try notificationPayloads($0) }) else {
            return .notTaken
        }
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
    }

    /// Runs one batch: each append's seq, or why it has none.
    func appendDirectMessages(_ batch: [DirectAppend]) async -> [BatchOutcome<Int64>] {
        var bindings = PostgresBindings()
        bindings.append(batch.map(\.draft.time.rawValue))
        bindings.append(batch.map(\.draft.conversation.rawValue))
        bindings.append(batch.map(\.draft.id.rawValue))
        bindings.append(batch.map(\.draft.sender.rawValue))
        bindings.append(batch.map(\.draft.clientID.rawValue))
        bindings.append(batch.map(\.draft.body))
        bindings.append(batch.map(\.draft.countsAsUnread))
        bindings.append(batch.map(\.draft.needsReadReceipt))
        bindings.append(batch.map { $0.draft.type ?? "" })
        bindings.append(batch.map { $0.draft.type == nil })
        bindings.append(batch.map(\.ext))
        bindings.append(batch.map(\.notification))
        let events = batch.enumerated().flatMap { index, append in append.events.map { (index + 1, $0) } }
        bindings.append(events.map { Int64($0.0) })
        bindings.append(events.map(\.1.id))
        bindings.append(events.map(\.1.type.rawValue))
        bindings.append(events.map(\.1.conversation.rawValue))
        bindings.append(events.map(\.1.time.rawValue))
        bindings.append(events.map(\.1.payload))
        bindings.append(Self.channel)
        let started = ContinuousClock.now
        let rows: [(Int64, Int64)]
        do {
            rows = try await withPooledConnection { [bindings] connection in
                try await connection.run(AppendDirectMessages.self, bindings, logger: logger).map {
                    try $0.decode((Int64, Int64, Int64).self)
                }.map { ($0.0, $0.1) }
            }
        } catch .unreachable(let reason) {
            return batch.map { _ in .unreachable(reason) }
        } catch {
            return batch.map { _ in .failed }
        }
        if !rows.isEmpty { commits.record(operations: rows.count, duration: ContinuousClock.now - started) }
        var outcomes = [BatchOutcome<Int64>](repeating: .notTaken, count: batch.count)
        for (number, seq) in rows where number >= 1 && number <= batch.count { outcomes[Int(number) - 1] = .done(seq) }
        return outcomes
    }

    /// An append the batched statement takes, with what it tells others written beforehand with seq 0, which the
    /// statement replaces with the seq it takes: in the hand-written JSON `,"seq":0,"time":` occurs only where the
    /// writer put it (a quote inside a string is always escaped), and that is checked. The entry keeps the draft's
    /// time, so the statement takes only an append whose time does not go back.
    struct DirectAppend: Sendable {
        let draft: MessageDraft
        let events: [WebhookEventDraft]
        let notification: String
        /// The entry's `ext` as stored, `""` for none (never what an `ext` is stored as: that is a JSON object).
        let ext: String

        init?(_ draft: MessageDraft, notificationPayloads: (Change) throws -> [String]) {
            // A reply decides its quote under the conversation's lock (``ReplyQuote``): not in a batch.
            guard draft.conversation.kind == .direct, draft.recall == nil, draft.edit == nil, draft.replyTo == nil,
                draft.quote == nil,
                draft.group == nil, draft.receiptRequest == nil, draft.announcement == .everyone,
                let ext = try? (EntryJSON.encode(draft.ext) ?? "")
            else { return nil }
            let provisional = Change.appended(draft.message(at: .zero), membershipSeq: nil, pushes: true)
            let events = provisional.webhookEvents
            guard let notifications = try? notificationPayloads(provisional), notifications.count == 1,
                let notification = notifications.first,
                notification.occurrences(of: PostgresStore.seqInNotification) == 1,
                events.allSatisfy({ $0.payload.occurrences(of: PostgresStore.seqInEntry) == 1 })
            else { return nil }
            self.draft = draft
            self.events = events
            self.notification = notification
            self.ext = ext
        }

        /// Two appends share no batch when they append to one conversation (one statement moves a conversation's
        /// head once) or carry one `(sender, clientId)` (the second is the first's retry).
        static func apart(_ one: DirectAppend, _ other: DirectAppend) -> Bool {
            one.draft.conversation == other.draft.conversation
                || (one.draft.sender == other.draft.sender && one.draft.clientID == other.draft.clientID)
        }
    }

    static let seqInEntry = #","seq":0,"time":"#
    static let seqInNotification = #""seq":0"#

    /// The most operations in one batch (of messages, deliveries or reads).
    static let maxBatch = 64
    /// The most batches of one kind under way at once: a batch waiting for a lock (a retry's first attempt not yet
    /// committed) holds up only the operations in it.
    static let batchesAtOnce = 2

    /// The batch's appends (`$1`–`$12`: one array per column, `$12` the notifications), their webhook events
    /// (`$13`–`$18`: the append each belongs to, numbered from 1, then the event's columns) and the notification
    /// channel (`$19`). Returns the number and the seq of each append written. The statement locks the conversations'
    /// rows as an append's update does (`FOR NO KEY UPDATE`), skipping those another transaction holds when it reaches
    /// them (`SKIP LOCKED`): it does not lock rows in an order, so it must not wait for them. It can still wait — for an
    /// insert of the same `(sender, clientId)` not yet committed, and in this project's tests now and then for a held
    /// row — which is why two batches run at once (``batchesAtOnce``).
    enum AppendDirectMessages: HotStatement {
        static let sql = """
            WITH draft AS (
                SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::bool[], $8::bool[], $9::text[], $10::bool[], $11::text[], $12::text[])
                    WITH ORDINALITY AS d(time, conversation_id, id, sender, client_id, body, counts_unread,
                        needs_receipt, type, no_type, ext, notification, n)
            ), locked AS MATERIALIZED (
                SELECT c.id FROM conversation c WHERE c.id = ANY($2::text[]) FOR NO KEY UPDATE SKIP LOCKED
            ), head AS (
                UPDATE conversation c SET last_seq = c.last_seq + 1, last_time = d.time,
                    stamp = GREATEST(change_stamp(), c.stamp)
                FROM locked l JOIN draft d ON d.conversation_id = l.id
                WHERE c.id = l.id AND c.last_time <= d.time
                    AND NOT EXISTS (SELECT 1 FROM message m WHERE m.sender = d.sender AND m.client_id = d.client_id)
                RETURNING d.n, c.last_seq, c.stamp
            ), entry AS (
                INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, counts_unread,
                    needs_receipt, type, ext, stamp)
                SELECT d.conversation_id, h.last_seq, d.id, d.sender, d.client_id, d.time, d.body, d.counts_unread,
                    d.needs_receipt, CASE WHEN d.no_type THEN NULL ELSE d.type END, NULLIF(d.ext, ''), change_stamp()
                FROM head h JOIN draft d ON d.n = h.n
                RETURNING seq
            ), recorded AS (
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT h.stamp, v.event_id, v.type, v.conversation_id, d.id, v.created_at,
                    replace(v.payload, '\(seqInEntry)', ',"seq":' || h.last_seq || ',"time":')
                FROM unnest($13::int8[], $14::text[], $15::text[], $16::text[], $17::int8[], $18::text[])
                    WITH ORDINALITY AS v(append, event_id, type, conversation_id, created_at, payload, k)
                JOIN head h ON h.n = v.append JOIN draft d ON d.n = v.append
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint e WHERE \(endpointWants("v.type")))
                ORDER BY v.k
            ), told AS (
                SELECT pg_notify($19, replace(d.notification, '\(seqInNotification)', '"seq":' || h.last_seq))
                FROM head h JOIN draft d ON d.n = h.n
            )
            SELECT h.n, h.last_seq, (SELECT count(*) FROM told) + (SELECT count(*) FROM entry) FROM head h
            """
    }
}

extension String {
    /// How many times `part` occurs, not overlapping (compared as UTF-8).
    func occurrences(of part: String) -> Int {
        let (text, part) = (Array(utf8), Array(part.utf8))
        guard !part.isEmpty, text.count >= part.count else { return 0 }
        var (count, index) = (0, 0)
        while index <= text.count - part.count {
            if text[index] == part[0], text[index..<index + part.count].elementsEqual(part) {
                count += 1
                index += part.count
            } else {
                index += 1
            }
        }
        return count
    }
}
