// Courier — Apache-2.0
public import CourierWire
internal import Foundation
internal import Crypto
#if canImport(Glibc)
internal import Glibc
#endif

extension Change {
    /// The webhook events it causes, recorded in its own transaction (ADR 0030), without I/O: a new entry's
    /// (``WebhookEvents/entry(_:pushes:)``), a read's that shared something, a moved delivery watermark's. A view or an
    /// account's change causes none.
    public var webhookEvents: [WebhookEventDraft] {
        switch self {
        case .appended(let message, _, let pushes): WebhookEvents.entry(message, pushes: pushes)
        case .read(let read): WebhookEvents.read(read).map { [$0] } ?? []
        case .delivered(let conversation, let account, let watermark, let time):
            [WebhookEvents.delivered(account, in: conversation, watermark, at: time)]
        case .profileChanged(let profile): [WebhookEvents.accountUpdated(profile)]
        case .reacted(let event, let time, _): [WebhookEvents.reacted(event, at: time)]
        case .viewChanged, .accountChanged, .deviceKicked: []
        }
    }
}

/// The events a change causes and what they say: pure functions of the change (sans I/O), so both backends record the
/// same events for the same change.
public enum WebhookEvents {
    /// The events of a new log entry: a message, a recall, an edit, a group change or a late ask for receipts; and for a
    /// message or a recall that someone may lack, when `pushes`, its push event.
    static func entry(_ message: WireMessage, pushes: Bool) -> [WebhookEventDraft] {
        let type: WebhookEventType =
            if message.recall != nil { .messageRecalled }
            else if message.edit != nil { .messageEdited }
            else if message.group != nil { .groupChanged }
            else if message.receiptRequest != nil { .readReceiptsRequested }
            else { .messageCreated }
        // Hand-written JSON (this runs in the writer's transaction, once per message): the frames' writer, once.
        var data = JSONTextWriter()
        data.raw("{\"message\":")
        data.message(message)
        data.raw("}")
        var event = draft(type, message.conversation, message.time) { json in json.raw(data.text) }
        event.messageID = message.id
        // A message or a recall that someone may lack: in the push queue, written as `{"message": …}` only (the
        // recipients are added when it is delivered).
        guard pushes, message.isChatMessage || message.recall != nil else { return [event] }
        let queue = WebhookEventType.pushQueue(of: message.conversation)
        return [
            event,
            WebhookEventDraft(
                id: eventID(.messageUndelivered, queue.rawValue, data.text),
                messageID: message.id,
                type: .messageUndelivered,
                conversation: queue,
                time: message.time,
                payload: data.text
            ),
        ]
    }

    /// The event of a read: what the read shared (the reader's receipts), and in a group the messages that asked
    /// for receipts which it newly covers, with their counts. None for a read that moved nothing shared (a private
    /// one: the reader asked that nobody learn of it).
    static func read(_ read: Change.Read) -> WebhookEventDraft? {
        guard read.shared != nil || !read.receipts.isEmpty else { return nil }
        return draft(.messageRead, read.conversation, read.time) { json in
            json.raw("{\"conversation\":")
            json.string(read.conversation.rawValue)
            if let shared = read.shared {
                json.raw(",\"read\":")
                json.watermark(shared.read)
                if !shared.readSeqs.isEmpty {
                    json.raw(",\"readSeqs\":")
                    json.seqs(shared.readSeqs)
                }
            }
            json.raw(",\"reader\":")
            json.string(read.reader.rawValue)
            if !read.receipts.isEmpty {
                json.raw(",\"receipts\":[")
                for (index, receipt) in read.receipts.enumerated() {
                    if index > 0 { json.raw(",") }
                    json.raw("{\"messageId\":")
                    json.string(receipt.tally.messageID.rawValue)
                    json.raw(",\"readCount\":\(receipt.tally.readCount),\"seq\":\(receipt.seq.rawValue)")
                    json.raw(",\"unreadCount\":\(receipt.tally.unreadCount)}")
                }
                json.raw("]")
            }
            json.raw("}")
        }
    }

    /// The event of a reaction added or removed: the reaction event as the members' devices get it.
    static func reacted(_ event: ReactionEvent, at time: Timestamp) -> WebhookEventDraft {
        var draft = draft(event.added ? .reactionAdded : .reactionRemoved, event.conversation, time) { json in
            json.raw("{\"reaction\":")
            json.foundation(event)
            json.raw("}")
        }
        draft.messageID = event.messageID
        return draft
    }

    /// The event of a delivery watermark that moved.
    static func delivered(
        _ account: AccountID,
        in conversation: ConversationID,
        _ watermark: Watermark,
        at time: Timestamp
    ) -> WebhookEventDraft {
        draft(.messageDelivered, conversation, time) { json in
            json.raw("{\"account\":")
            json.string(account.rawValue)
            json.raw(",\"conversation\":")
            json.string(conversation.rawValue)
            json.raw(",\"delivered\":")
            json.watermark(watermark)
            json.raw("}")
        }
    }

    /// Who is never notified of `message` as a recipient: its sender's account (a recall's operator), and for a
    /// one-way recall the recalled message's sender too (their account keeps the message).
    public static func pushExclusions(for message: WireMessage) -> [AccountID] {
        var excluded: Set<AccountID> = [message.sender]
        if let recall = message.recall {
            excluded.insert(recall.recalledBy)
            if recall.mode == .oneWay { excluded.insert(recall.sender) }
        }
        return excluded.sorted { $0.rawValue < $1.rawValue }
    }

    /// The body of a `message.undelivered` delivery: its stored `{"message": …}` with the recipients added, and the
    /// cursor of the rest when there are more.
    public static func undeliveredPayload(
        stored: String,
        createdAt: Timestamp,
        recipients: [PushRecipient],
        nextCursor: AccountID?
    ) -> String {
        var json = JSONTextWriter()
        json.raw("{\"data\":")
        json.raw(String(stored.dropLast()))
        if let nextCursor {
            json.raw(",\"nextCursor\":")
            json.string(nextCursor.rawValue)
        }
        json.raw(",\"recipients\":")
        pushRecipients(recipients, into: &json)
        json.raw("},\"timestamp\":\"\(iso8601(createdAt))\",\"type\":\"message.undelivered\"}")
        return json.text
    }

    /// `[{"account", "muted", "pushTokens": [{"device", "platform", "sandbox", "token", "updatedAt"}]}]`.
    public static func pushRecipients(_ recipients: [PushRecipient], into json: inout JSONTextWriter) {
        json.raw("[")
        for (index, recipient) in recipients.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw("{\"account\":")
            json.string(recipient.account.rawValue)
            json.raw(",\"muted\":\(recipient.muted),\"pushTokens\":[")
            for (index, token) in recipient.tokens.enumerated() {
                if index > 0 { json.raw(",") }
                json.raw("{\"device\":")
                json.string(token.device.rawValue)
                json.raw(",\"platform\":")
                json.string(token.platform.rawValue)
                json.raw(",\"sandbox\":\(token.sandbox),\"token\":")
                json.string(token.token)
                json.raw(",\"updatedAt\":\(token.updatedAt.rawValue)}")
            }
            json.raw("]}")
        }
        json.raw("]")
    }

    /// The event of a profile change: `{"profile": …}`, the profile after it, in the account's own queue
    /// (``WebhookEventType/accountQueue(of:)``).
    static func accountUpdated(_ profile: AccountProfile) -> WebhookEventDraft {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(profile)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        let queue = WebhookEventType.accountQueue(of: profile.account)
        return draft(.accountUpdated, queue, profile.updatedAt ?? .zero) { writer in
            writer.raw("{\"profile\":")
            writer.raw(json)
            writer.raw("}")
        }
    }

    /// The envelope `{"data", "timestamp", "type"}` around what `data` writes.
    static func draft(
        _ type: WebhookEventType,
        _ conversation: ConversationID,
        _ time: Timestamp,
        data: (inout JSONTextWriter) -> Void
    ) -> WebhookEventDraft {
        var json = JSONTextWriter()
        json.raw("{\"data\":")
        data(&json)
        json.raw(",\"timestamp\":\"\(iso8601(time))\",\"type\":")
        json.string(type.rawValue)
        json.raw("}")
        let payload = json.text
        return WebhookEventDraft(
            id: eventID(type, conversation.rawValue, payload),
            type: type,
            conversation: conversation,
            time: time,
            payload: payload
        )
    }

    /// `evt_` and 32 hex digits: the first 16 bytes of the SHA-256 of the event's type, queue and payload (which
    /// holds its time), made from the change alone (ADR 0057): the derivation stays pure, and two events share an id
    /// only when they say the same thing of the same queue, which a receiver may then well take for one. Every
    /// payload names what makes it one of a kind: a message's id, a moved watermark, a reaction's version, a
    /// profile's version, a read's shared position and time.
    static func eventID(_ type: WebhookEventType, _ queue: String, _ payload: String) -> String {
        var hash = SHA256()
        for part in [type.rawValue, queue, payload] {
            var part = part
            part.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            hash.update(data: [0])
        }
        let hex = Array("0123456789abcdef".utf8)
        var id = Array("evt_".utf8)
        for byte in hash.finalize().prefix(16) {
            id.append(hex[Int(byte >> 4)])
            id.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// `2026-11-24T12:55:14.147Z` (no formatter object: this runs in the writer's transaction).
    static func iso8601(_ time: Timestamp) -> String {
        var seconds = time_t(time.rawValue / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let milliseconds = Int32(((time.rawValue % 1000) + 1000) % 1000)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(milliseconds, 3))Z"
    }
}
