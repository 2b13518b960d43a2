// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A message in a direct chat that exists, written with the other devices' messages of the moment: what arrives
    /// while a batch is under way goes into the next one, and a batch is one transaction of two statements (three
    /// round trips and one commit for many devices instead of as many each, ADR 0035): the entries, then their
    /// notifications and webhook events, built from the seqs the first statement assigned (ADR 0057). Its outcome, or
    /// `.notTaken` for anything else — a first message, a stored duplicate, an earlier time, a conversation whose row
    /// another transaction holds, a recall, a reply, an entry not announced to everyone — or `.failed` for a batch
    /// that failed (a lost uniqueness race, a lost connection), which then take ``appendOnce(_:recallRules:)``.
    func appendDirectMessage(_ draft: MessageDraft) async -> BatchOutcome<AppendResult> {
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
    }

    /// Runs one batch: each append's outcome, or why it has none.
    func appendDirectMessages(_ batch: [DirectAppend]) async -> [BatchOutcome<AppendResult>] {
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
        let started = ContinuousClock.now
        let written: [(Int, AppendResult)]
        do {
            written = try await withPooledConnection { [bindings, logger] connection in
                try await connection.withTransaction(logger: logger) { connection in
                    var written: [(Int, AppendResult)] = []
                    for row in try await connection.run(AppendDirectMessages.self, bindings, logger: logger) {
                        let (number, seq) = try row.decode((Int, Int64).self)
                        guard (1...batch.count).contains(number) else { continue }
                        let message = batch[number - 1].draft.message(at: Seq(seq))
                        written.append((number, AppendResult(appended: message, membershipSeq: nil, announcement: .everyone)))
                    }
                    try await self.publish(written.compactMap(\.1.change), on: connection)
                    return written
                }
            }
        } catch .unreachable(let reason) {
            return batch.map { _ in .unreachable(reason) }
        } catch {
            return batch.map { _ in .failed }
        }
        if !written.isEmpty { commits.record(operations: written.count, duration: ContinuousClock.now - started) }
        var outcomes = [BatchOutcome<AppendResult>](repeating: .notTaken, count: batch.count)
        for (number, result) in written { outcomes[number - 1] = .done(result) }
        return outcomes
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

    /// The batch's appends (`$1`–`$11`: one array per column). Returns the number (from 1) and the seq of each
    /// append written. The statement locks the conversations' rows as an append's update does (`FOR NO KEY UPDATE`),
    /// skipping those another transaction holds when it reaches them (`SKIP LOCKED`): it does not lock rows in an
    /// order, so it must not wait for them. It can still wait — for an insert of the same `(sender, clientId)` not yet
    /// committed, and in this project's tests now and then for a held row — which is why two batches run at once
    /// (``batchesAtOnce``).
    enum AppendDirectMessages: HotStatement {
        static let sql = """
            WITH draft AS (
                SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::bool[], $8::bool[], $9::text[], $10::bool[], $11::text[])
                    WITH ORDINALITY AS d(time, conversation_id, id, sender, client_id, body, counts_unread,
                        needs_receipt, type, no_type, ext, n)
            ), locked AS MATERIALIZED (
                SELECT c.id FROM conversation c WHERE c.id = ANY($2::text[]) FOR NO KEY UPDATE SKIP LOCKED
            ), head AS (
                UPDATE conversation c SET last_seq = c.last_seq + 1, last_time = d.time,
                    stamp = GREATEST(change_stamp(), c.stamp)
                FROM locked l JOIN draft d ON d.conversation_id = l.id
                WHERE c.id = l.id AND c.last_time <= d.time
                    AND NOT EXISTS (SELECT 1 FROM message m WHERE m.sender = d.sender AND m.client_id = d.client_id)
                RETURNING d.n, c.last_seq
            ), entry AS (
                INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, counts_unread,
                    needs_receipt, type, ext, stamp)
                SELECT d.conversation_id, h.last_seq, d.id, d.sender, d.client_id, d.time, d.body, d.counts_unread,
                    d.needs_receipt, CASE WHEN d.no_type THEN NULL ELSE d.type END, NULLIF(d.ext, ''), change_stamp()
                FROM head h JOIN draft d ON d.n = h.n
            )
            SELECT h.n::int8, h.last_seq FROM head h
            """
    }
}
