// Courier — Apache-2.0
internal import GRDB
internal import CourierWire

/// What a local read covers, as the app said it.
enum LocalReadTarget: Sendable, Hashable {
    /// Messages read one by one, with the ack's optional short content.
    case messages([MessageID], content: String? = nil)
    case conversation
    case upToTime(Timestamp)
    /// Everything up to a message, included.
    case upToMessage(MessageID)
    /// Everything up to a message shown as a row, and the notices stored right after it (recall notices, receipt
    /// requests: entries with no row of their own, whose effect shows in place), up to the next row or a gap.
    case upToRow(MessageID)
}

/// Read acks queued for the server: the outbox rows they came from, and the request to send.
struct QueuedRead: Sendable {
    let rowIDs: [Int64]
    let request: ReadRequest
}

/// A reading position as stored on the device: a watermark plus seqs above it read one by one.
struct StoredReadPosition: Equatable {
    var watermark: Seq
    var time: Timestamp
    var readSeqs: Set<Seq>
}

extension LocalStore {
    /// Applies a read on this device at once (the unread count drops, messages become read-acked) and queues the
    /// ack for the server under `token`. Does nothing when everything named is already read.
    ///
    /// What it applies locally is what the server will: a message ack marks exactly those messages (ADR 0038), a
    /// read up to a message moves the watermark there; the server's answer arrives with the ack.
    ///
    /// - Returns: Whether an ack was queued.
    /// - Throws: ``CourierError/messageNotFound(_:)`` for an id not stored here; `message.notInConversation`.
    func markRead(
        _ target: LocalReadTarget,
        in conversation: ConversationID,
        isPrivate: Bool,
        token: String,
        me: AccountID,
        then publish: @escaping Publish
    ) async throws(CourierError) -> Bool {
        let queued = Locked(false)
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            guard try Self.conversationExists(db, conversation) else { return changes }
            let position = try Self.readPosition(db, conversation, me)
            let lastSeq = try Self.lastSeq(db, conversation)
            var queue: [(kind: String, value: String)] = []
            var newWatermark: Seq?
            var newSeqs: [Seq] = []
            var content: String?
            switch target {
            case .messages(let ids, let text):
                content = text
                for id in ids {
                    let (seq, sender) = try Self.storedMessage(db, id, in: conversation)
                    let isOwn = sender == me
                    guard !isOwn, seq > position.watermark, !position.readSeqs.contains(seq), !newSeqs.contains(seq)
                    else { continue }
                    newSeqs.append(seq)
                    queue.append(("message", id.rawValue))
                }
            case .conversation:
                guard lastSeq > position.watermark else { break }
                newWatermark = lastSeq
                queue.append(("seq", String(lastSeq.rawValue)))
            case .upToMessage(let id):
                let seq = try Self.storedMessage(db, id, in: conversation).seq
                guard seq > position.watermark else { break }
                newWatermark = seq
                queue.append(("seq", String(seq.rawValue)))
            case .upToRow(let id):
                var seq = try Self.storedMessage(db, id, in: conversation).seq
                // The notices that follow it without a gap; a row, or a seq not stored here, ends them.
                let following = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT seq, recall IS NOT NULL OR receiptRequest IS NOT NULL FROM message
                        WHERE conversationId = ? AND seq > ? ORDER BY seq LIMIT 100
                        """,
                    arguments: [conversation.rawValue, seq.rawValue]
                )
                for row in following {
                    let (next, isNotice): (Int64, Bool) = (row[0], row[1])
                    guard next == seq.rawValue + 1, isNotice else { break }
                    seq = Seq(next)
                }
                guard seq > position.watermark else { break }
                newWatermark = seq
                queue.append(("seq", String(seq.rawValue)))
            case .upToTime(let time):
                let seq = Seq(
                    try Int64.fetchOne(
                        db,
                        sql: "SELECT max(seq) FROM message WHERE conversationId = ? AND time <= ?",
                        arguments: [conversation.rawValue, time.rawValue]
                    ) ?? 0
                )
                guard seq > position.watermark else { break }
                newWatermark = seq
                queue.append(("time", String(time.rawValue)))
            }
            guard !queue.isEmpty else { return changes }
            let watermark = try newWatermark.map {
                Watermark(seq: $0, time: try Self.time(db, of: $0, in: conversation))
            }
            try Self.mergeReadPosition(db, conversation, me, watermark ?? .zero, newSeqs)
            for entry in queue {
                try db.execute(
                    sql: """
                        INSERT INTO readOutbox (conversationId, kind, value, private, token, content)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [conversation.rawValue, entry.kind, entry.value, isPrivate, token, content]
                )
            }
            queued.withLock { $0 = true }
            changes.touched.insert(conversation)
            return changes
        }
        return queued.withLock { $0 }
    }

    /// The seq and sender of message `id`, stored here in `conversation`.
    ///
    /// - Throws: ``CourierError/messageNotFound(_:)`` when it is not stored here; `message.notInConversation`.
    static func storedMessage(
        _ db: Database,
        _ id: MessageID,
        in conversation: ConversationID
    ) throws -> (seq: Seq, sender: AccountID) {
        guard
            let row = try Row.fetchOne(
                db,
                sql: "SELECT conversationId, seq, sender FROM message WHERE id = ?",
                arguments: [id.rawValue]
            )
        else { throw CourierError.messageNotFound("No message with id '\(id)' is stored on this device.") }
        guard row[0] == conversation.rawValue else {
            throw CourierError.invalidInput(
                code: .messageNotInConversation,
                message: "Message '\(id)' is not in conversation '\(conversation)'."
            )
        }
        return (Seq(row[1] as Int64), AccountID(rawValue: row[2] as String))
    }

    /// The queued read acks, oldest first; message acks of one conversation are batched (up to 100 per request).
    func queuedReads() async throws(CourierError) -> [QueuedRead] {
        try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT id, conversationId, kind, value, private, content FROM readOutbox ORDER BY id"
            )
            var queued: [QueuedRead] = []
            var batch: (ids: [Int64], conversation: String, isPrivate: Bool, content: String?, messages: [MessageID])?
            func closeBatch() {
                if let open = batch {
                    let request = ReadRequest(
                        conversation: ConversationID(rawValue: open.conversation),
                        messageIDs: open.messages,
                        isPrivate: open.isPrivate ? true : nil,
                        content: open.content
                    )
                    queued.append(QueuedRead(rowIDs: open.ids, request: request))
                }
                batch = nil
            }
            for row in rows {
                let (id, conversation, kind, value, isPrivate): (Int64, String, String, String, Bool) = (
                    row[0], row[1], row[2], row[3], row[4]
                )
                let content: String? = row[5]
                if kind == "message" {
                    // Acks batch when they share a conversation, privacy and content (the content goes with each).
                    if let open = batch, open.conversation == conversation, open.isPrivate == isPrivate,
                        open.content == content, open.messages.count < 100
                    {
                        batch?.ids.append(id)
                        batch?.messages.append(MessageID(rawValue: value))
                        continue
                    }
                    closeBatch()
                    batch = ([id], conversation, isPrivate, content, [MessageID(rawValue: value)])
                    continue
                }
                closeBatch()
                let number = Int64(value) ?? 0
                let request = ReadRequest(
                    conversation: ConversationID(rawValue: conversation),
                    seq: kind == "seq" ? Seq(number) : nil,
                    time: kind == "time" ? Timestamp(milliseconds: number) : nil,
                    isPrivate: isPrivate ? true : nil
                )
                queued.append(QueuedRead(rowIDs: [id], request: request))
            }
            closeBatch()
            return queued
        }
    }

    /// Removes sent read acks from the queue and applies the server's answer (the account's own position).
    ///
    /// - Returns: The tokens of the reads now fully sent.
    func completeReads(
        _ rowIDs: [Int64],
        with state: ReadState?,
        me: AccountID,
        then publish: @escaping Publish
    ) async throws(CourierError) -> [String] {
        let finished = Locked<[String]>([])
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            var tokens: Set<String> = []
            for id in rowIDs {
                if let token = try String.fetchOne(
                    db,
                    sql: "SELECT token FROM readOutbox WHERE id = ?",
                    arguments: [id]
                ) {
                    tokens.insert(token)
                }
                try db.execute(sql: "DELETE FROM readOutbox WHERE id = ?", arguments: [id])
            }
            let done = try tokens.filter { token in
                try Bool.fetchOne(
                    db,
                    sql: "SELECT NOT EXISTS (SELECT 1 FROM readOutbox WHERE token = ?)",
                    arguments: [token]
                ) ?? true
            }
            finished.withLock { $0 = Array(done) }
            if let state, try Self.conversationExists(db, state.conversation),
                try Self.mergeReadPosition(db, state.conversation, me, state.watermark, state.readSeqs) != nil
            {
                changes.touched.insert(state.conversation)
            }
            return changes
        }
        return finished.withLock { $0 }
    }

    /// Applies what a peer shares of its reading (a `read` event).
    func apply(_ event: ReadEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            guard event.account != me else { return InboundChanges() }
            // Kept even before the conversation's first message is stored here: it may outrun the send's ack.
            try Self.ensureConversation(db, event.conversation)
            return try Self.applyPeerReceipts(
                db,
                event.conversation,
                event.account,
                delivered: event.watermark,
                read: event.watermark,
                readSeqs: event.readSeqs,
                me: me
            )
        }
    }

    /// Applies the account's own reading position from another of its devices (a `readState` event).
    func apply(_ event: ReadStateEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            let state = event.state
            guard try Self.conversationExists(db, state.conversation),
                try Self.mergeReadPosition(db, state.conversation, me, state.watermark, state.readSeqs) != nil
            else { return changes }
            changes.touched.insert(state.conversation)
            if event.cause == .conversation {
                let position = try Self.readPosition(db, state.conversation, me)
                changes.conversationReads.append(
                    ConversationReadUpdate(
                        conversation: state.conversation,
                        watermark: Watermark(seq: position.watermark, time: position.time),
                        unreadCount: try Self.unreadCount(db, state.conversation, me: me)
                    )
                )
            }
            return changes
        }
    }

    // MARK: Transaction bodies

    static func readPosition(
        _ db: Database,
        _ conversation: ConversationID,
        _ account: AccountID
    ) throws
        -> StoredReadPosition
    {
        let row = try Row.fetchOne(
            db,
            sql: "SELECT readSeq, readTime FROM watermark WHERE conversationId = ? AND account = ?",
            arguments: [conversation.rawValue, account.rawValue]
        )
        let seqs = try Int64.fetchAll(
            db,
            sql: "SELECT seq FROM readAck WHERE conversationId = ? AND account = ?",
            arguments: [conversation.rawValue, account.rawValue]
        )
        return StoredReadPosition(
            watermark: Seq((row?[0] as Int64?) ?? 0),
            time: Timestamp(milliseconds: (row?[1] as Int64?) ?? 0),
            readSeqs: Set(seqs.map { Seq($0) })
        )
    }

    /// Merges a reading position into the stored one (watermark forward only, seqs united); returns the old and
    /// new positions when something changed.
    @discardableResult
    static func mergeReadPosition(
        _ db: Database,
        _ conversation: ConversationID,
        _ account: AccountID,
        _ watermark: Watermark,
        _ readSeqs: some Sequence<Seq>
    ) throws -> (old: StoredReadPosition, new: StoredReadPosition)? {
        let old = try readPosition(db, conversation, account)
        var new = old
        if watermark.seq > old.watermark {
            new.watermark = watermark.seq
            new.time = watermark.time
        }
        new.readSeqs = old.readSeqs.union(readSeqs).filter { $0 > new.watermark }
        guard new != old else { return nil }
        try db.execute(
            sql: """
                INSERT INTO watermark (conversationId, account, readSeq, readTime) VALUES (?, ?, ?, ?)
                ON CONFLICT (conversationId, account) DO UPDATE SET readSeq = excluded.readSeq, readTime = excluded.readTime
                WHERE watermark.readSeq < excluded.readSeq
                """,
            arguments: [conversation.rawValue, account.rawValue, new.watermark.rawValue, new.time.rawValue]
        )
        try db.execute(
            sql: "DELETE FROM readAck WHERE conversationId = ? AND account = ? AND seq <= ?",
            arguments: [conversation.rawValue, account.rawValue, new.watermark.rawValue]
        )
        for seq in new.readSeqs.subtracting(old.readSeqs) {
            try db.execute(
                sql: "INSERT OR IGNORE INTO readAck (conversationId, account, seq) VALUES (?, ?, ?)",
                arguments: [conversation.rawValue, account.rawValue, seq.rawValue]
            )
        }
        return (old, new)
    }

    /// A peer's delivery and shared read state: reports your messages that became delivered and read. Read implies
    /// delivered.
    static func applyPeerReceipts(
        _ db: Database,
        _ conversation: ConversationID,
        _ account: AccountID,
        delivered: Watermark,
        read: Watermark,
        readSeqs: [Seq],
        me: AccountID
    ) throws -> InboundChanges {
        var changes = InboundChanges()
        let deliveredUpTo = delivered.seq >= read.seq ? delivered : read
        if let update = try advanceDelivered(db, conversation, account, deliveredUpTo, me: me) {
            changes.deliveries.append(update)
        }
        guard let (old, new) = try mergeReadPosition(db, conversation, account, read, readSeqs) else {
            return changes
        }
        let highest = max(new.watermark, new.readSeqs.max() ?? .zero)
        let rows = try Row.fetchAll(
            db,
            sql:
                "SELECT id, seq FROM message WHERE conversationId = ? AND sender = ? AND seq > ? AND seq <= ? ORDER BY seq",
            arguments: [conversation.rawValue, me.rawValue, old.watermark.rawValue, highest.rawValue]
        )
        let ids = rows.compactMap { row -> MessageID? in
            let seq = Seq(row[1] as Int64)
            let isRead = seq <= new.watermark || new.readSeqs.contains(seq)
            return isRead && !old.readSeqs.contains(seq) ? MessageID(rawValue: row[0]) : nil
        }
        if !ids.isEmpty {
            changes.reads.append(
                ReadUpdate(
                    conversation: conversation,
                    account: account,
                    watermark: Watermark(seq: new.watermark, time: new.time),
                    messageIDs: ids
                )
            )
        }
        return changes
    }

    static func lastSeq(_ db: Database, _ conversation: ConversationID) throws -> Seq {
        Seq(
            try Int64.fetchOne(
                db,
                sql: """
                    SELECT max(c.lastSeq, coalesce((SELECT max(seq) FROM message WHERE conversationId = c.id), 0))
                    FROM conversation c WHERE c.id = ?
                    """,
                arguments: [conversation.rawValue]
            ) ?? 0
        )
    }

    static func time(_ db: Database, of seq: Seq, in conversation: ConversationID) throws -> Timestamp {
        Timestamp(
            milliseconds: try Int64.fetchOne(
                db,
                sql: "SELECT time FROM message WHERE conversationId = ? AND seq = ?",
                arguments: [conversation.rawValue, seq.rawValue]
            ) ?? 0
        )
    }
}
