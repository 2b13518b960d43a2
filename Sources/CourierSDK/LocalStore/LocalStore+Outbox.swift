// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// An outbox entry to send.
struct OutgoingMessage: Sendable, Hashable {
    let clientID: ClientMessageID
    let conversation: ConversationID
    var type: String? = nil
    var body: String
    var replyTo: MessageID? = nil
    var needsReadReceipt = false
    var ext: [String: String]? = nil

    /// The attachment a queued message still has to upload (its `url` is a file on this device, ADR 0029).
    var pendingUpload: Attachment? {
        MessageContent(type: type, body: body).attachment.flatMap { $0.url.isFileURL ? $0 : nil }
    }
}

extension LocalStore {
    /// Queues a message; a repeat of the same client id is a no-op (the original stays queued or sent).
    func enqueue(_ outgoing: OutgoingMessage, at date: Date) async throws(CourierError) {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO outbox (clientId, conversationId, body, createdAt, replyTo, needsReadReceipt, type, ext)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (clientId) DO UPDATE SET failureCode = NULL, failureMessage = NULL
                    """,
                arguments: [
                    outgoing.clientID.rawValue, outgoing.conversation.rawValue, outgoing.body,
                    date.timeIntervalSince1970, outgoing.replyTo?.rawValue, outgoing.needsReadReceipt, outgoing.type,
                    Self.json(ext: outgoing.ext),
                ]
            )
        }
    }

    /// Replaces a queued message's body (its attachment, once uploaded, points to where it went).
    func setOutboxBody(_ body: String, of clientID: ClientMessageID) async throws(CourierError) {
        try await write { db in
            try db.execute(sql: "UPDATE outbox SET body = ? WHERE clientId = ?", arguments: [body, clientID.rawValue])
        }
    }

    /// Queues a refused message again; whether one was refused under this client id.
    func retryFailed(_ clientID: ClientMessageID) async throws(CourierError) -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE outbox SET failureCode = NULL, failureMessage = NULL
                    WHERE clientId = ? AND failureCode IS NOT NULL
                    """,
                arguments: [clientID.rawValue]
            )
            return db.changesCount > 0
        }
    }

    /// The queued messages that have not failed, oldest first.
    func sendableOutbox() async throws(CourierError) -> [OutgoingMessage] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql:
                    """
                    SELECT clientId, conversationId, body, replyTo, needsReadReceipt, type, ext FROM outbox
                    WHERE failureCode IS NULL
                    ORDER BY createdAt, rowid
                    """
            ).map {
                OutgoingMessage(
                    clientID: ClientMessageID(rawValue: $0[0]),
                    conversation: ConversationID(rawValue: $0[1]),
                    type: $0[5],
                    body: $0[2],
                    replyTo: ($0[3] as String?).map(MessageID.init(rawValue:)),
                    needsReadReceipt: $0[4],
                    ext: Self.ext(fromJSON: $0[6])
                )
            }
        }
    }

    /// Moves an acknowledged message from the outbox into the conversation, in one transaction, and hands the message
    /// as stored to `stored` from the commit, after the transaction's events: a task cancelled once the transaction
    /// committed (a cut connection cancels the flush that called this) still tells whoever waits for the message.
    /// Reading it after the commit instead, a cancelled read left a `SendHandle/stored()` waiting for ever, the row gone
    /// from the outbox so that nothing would send it again (the chaos test, once).
    func completeSend(
        _ clientID: ClientMessageID,
        with message: WireMessage,
        me: AccountID,
        then publish: @escaping Publish,
        stored: @escaping @Sendable (Message) -> Void = { _ in }
    ) async throws(CourierError) {
        let found = Locked<Message?>(nil)
        let publishing: Publish = { changes in
            publish(changes)
            if let message = found.withLock({ $0 }) { stored(message) }
        }
        try await write(publishing: publishing, me: me) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE clientId = ?", arguments: [clientID.rawValue])
            // Stored already (e.g. by a resync before the ack): receipts that covered it were reported then.
            let isNew = try !Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM message WHERE id = ?)",
                arguments: [message.id.rawValue]
            )!
            var changes = try Self.insert(db, [message], me: me, excluding: message.id, arrival: .online)
            if isNew { changes.merge(try Self.receiptsAheadOfAck(db, message, me: me)) }
            let stored = try Self.fetchMessages(db, message.conversation, me: me, where: "id = ?", [message.id.rawValue])
            found.withLock { $0 = stored.first }
            return changes
        }
    }

    /// A peer's delivery or read receipt can outrun the ack of the send it covers (the server pushes it on the same
    /// connection, possibly first); it was stored but named no message then. Reports it for the message now.
    static func receiptsAheadOfAck(_ db: Database, _ message: WireMessage, me: AccountID) throws -> InboundChanges {
        var changes = InboundChanges()
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT account, deliveredSeq, deliveredTime, readSeq, readTime FROM watermark
                WHERE conversationId = ?1 AND account != ?2 AND (deliveredSeq >= ?3 OR readSeq >= ?3)
                """,
            arguments: [message.conversation.rawValue, me.rawValue, message.seq.rawValue]
        )
        for row in rows {
            let account = AccountID(rawValue: row[0])
            if (row[1] as Int64) >= message.seq.rawValue {
                changes.deliveries.append(
                    DeliveryUpdate(
                        conversation: message.conversation,
                        account: account,
                        watermark: Watermark(seq: Seq(row[1] as Int64), time: Timestamp(milliseconds: row[2])),
                        messageIDs: [message.id]
                    )
                )
            }
            if (row[3] as Int64) >= message.seq.rawValue {
                changes.reads.append(
                    ReadUpdate(
                        conversation: message.conversation,
                        account: account,
                        watermark: Watermark(seq: Seq(row[3] as Int64), time: Timestamp(milliseconds: row[4])),
                        messageIDs: [message.id]
                    )
                )
            }
        }
        return changes
    }

    /// Marks a queued message as refused by the server; it is not retried until resent.
    func failSend(_ clientID: ClientMessageID, with error: CourierError) async throws(CourierError) {
        try await write { db in
            try db.execute(
                sql: "UPDATE outbox SET failureCode = ?, failureMessage = ? WHERE clientId = ?",
                arguments: [error.code.rawValue, error.description, clientID.rawValue]
            )
        }
    }

    /// Deletes a refused message from the outbox; one still queued stays. Whether one was deleted.
    func discardFailed(_ clientID: ClientMessageID) async throws(CourierError) -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM outbox WHERE clientId = ? AND failureCode IS NOT NULL",
                arguments: [clientID.rawValue]
            )
            return db.changesCount > 0
        }
    }

    /// Deletes a queued or refused message of `conversation` from the outbox (``SendHandle/cancel()``); with
    /// `onlyUploading`, only one whose attachment is still to upload (it cannot have gone out). Whether one went.
    func removeFromOutbox(_ clientID: ClientMessageID, in conversation: ConversationID, onlyUploading: Bool)
        async throws(CourierError) -> Bool
    {
        try await write { db in
            if onlyUploading {
                guard
                    let row = try Row.fetchOne(
                        db,
                        sql: "SELECT type, body FROM outbox WHERE clientId = ? AND conversationId = ?",
                        arguments: [clientID.rawValue, conversation.rawValue]
                    ),
                    OutgoingMessage(clientID: clientID, conversation: conversation, type: row[0], body: row[1])
                        .pendingUpload != nil
                else { return false }
            }
            try db.execute(
                sql: "DELETE FROM outbox WHERE clientId = ? AND conversationId = ?",
                arguments: [clientID.rawValue, conversation.rawValue]
            )
            return db.changesCount > 0
        }
    }

    /// The outbox of a conversation (or of all), oldest first.
    func pendingMessages(in conversation: ConversationID?) async throws(CourierError) -> [PendingMessage] {
        try await read { db in try Self.fetchPendingMessages(db, in: conversation) }
    }

    static func fetchPendingMessages(_ db: Database, in conversation: ConversationID?) throws -> [PendingMessage] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT clientId, conversationId, body, createdAt, failureCode, failureMessage, type FROM outbox
                WHERE ? IS NULL OR conversationId = ? ORDER BY createdAt, rowid
                """,
            arguments: [conversation?.rawValue, conversation?.rawValue]
        ).map { row in
            let failure = (row[4] as String?).map {
                CourierError.server(code: ErrorCode(rawValue: $0), message: row[5] ?? "")
            }
            return PendingMessage(
                clientID: ClientMessageID(rawValue: row[0]),
                conversation: ConversationID(rawValue: row[1]),
                type: row[6],
                body: row[2],
                createdAt: Date(timeIntervalSince1970: row[3]),
                status: failure == nil ? .sending : .failed,
                failure: failure
            )
        }
    }
}
