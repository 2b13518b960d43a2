// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A message in a direct chat that exists, in one statement that commits on its own (instead of four round
    /// trips): the entry, its notification and its webhook deliveries. Their payloads are written beforehand with
    /// seq 0, which the statement replaces with the seq it takes: in the hand-written JSON `,"seq":0,"time":` occurs
    /// only where the writer put it (a quote inside a string is always escaped), and that is checked. The entry keeps
    /// the draft's time, so the statement takes only an append whose time does not go back. `nil` for anything else —
    /// a first message, a stored duplicate, an earlier time, a recall, a reply, an entry not announced to everyone —
    /// which takes ``appendOnce(_:)``.
    func appendDirectMessage(_ draft: MessageDraft) async throws(StorageError) -> AppendResult? {
        // A reply decides its quote under the conversation's lock (``ReplyQuote``): not in one statement.
        guard draft.conversation.kind == .direct, draft.recall == nil, draft.replyTo == nil,
            draft.announcement == .everyone
        else { return nil }
        let provisional = Change.appended(draft.message(at: .zero), membershipSeq: nil, pushes: true)
        let events = provisional.webhookEvents
        let notifications: [String]
        do {
            notifications = try notificationPayloads(provisional)
        } catch {
            return nil
        }
        guard notifications.count == 1, let notification = notifications.first,
            notification.occurrences(of: Self.seqInNotification) == 1,
            events.allSatisfy({ $0.payload.occurrences(of: Self.seqInEntry) == 1 })
        else { return nil }
        let row = try await autocommit { connection in
            var bindings = try Self.entryBindings(draft)
            try bindings.append(events.map(\.id))
            try bindings.append(events.map(\.type.rawValue))
            try bindings.append(events.map(\.conversation.rawValue))
            try bindings.append(events.map(\.time.rawValue))
            try bindings.append(events.map(\.payload))
            try bindings.append(Self.channel)
            try bindings.append(notification)
            return try await connection.run(AppendDirectMessage.self, bindings, logger: logger).first
                .map { try $0.decode((Int64, Int64).self).0 }
        }
        guard let seq = row else { return nil }
        return AppendResult(message: draft.message(at: Seq(seq)), isDuplicate: false)
    }

    static let seqInEntry = #","seq":0,"time":"#
    static let seqInNotification = #""seq":0"#

    enum AppendDirectMessage: HotStatement {
        static let sql = """
            WITH head AS (
                UPDATE conversation SET last_seq = last_seq + 1, last_time = $1,
                    stamp = GREATEST(change_stamp(), stamp)
                WHERE id = $2 AND last_time <= $1
                    AND NOT EXISTS (SELECT 1 FROM message WHERE sender = $4 AND client_id = $5)
                RETURNING last_seq, stamp
            ), entry AS (
                INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body, reply_to, quote, recall,
                    counts_unread, needs_receipt, group_change, receipt_request, type, ext, stamp)
                SELECT $2, head.last_seq, $3, $4, $5, $1, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, change_stamp()
                FROM head
                RETURNING seq
            ), recorded AS (
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT head.stamp, v.event_id, v.type, v.conversation_id, $3, v.created_at,
                    replace(v.payload, '\(seqInEntry)', ',"seq":' || entry.seq || ',"time":')
                FROM entry CROSS JOIN head
                CROSS JOIN unnest($16::text[], $17::text[], $18::text[], $19::int8[], $20::text[])
                    WITH ORDINALITY AS v(event_id, type, conversation_id, created_at, payload, n)
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint e WHERE \(endpointWants("v.type")))
                ORDER BY v.n
            ), told AS (
                SELECT pg_notify($21, replace($22, '\(seqInNotification)', '"seq":' || entry.seq)) FROM entry
            )
            SELECT entry.seq, (SELECT count(*) FROM told) FROM entry
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
