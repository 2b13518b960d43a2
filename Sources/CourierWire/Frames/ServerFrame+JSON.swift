// Courier — Apache-2.0

/// A hand-written JSON encoder for server frames: the server encodes several frames per message (acks, events), and
/// Foundation's `JSONEncoder` was the largest single cost in its profile. The output is the same JSON as
/// `JSONEncoder` with sorted keys (the golden tests compare both paths byte for byte).
extension ServerFrame {
    /// The frame as compact JSON text with sorted keys.
    public var jsonText: String {
        var writer = JSONTextWriter()
        writer.frame(self)
        return writer.text
    }
}

/// Compact JSON text with sorted keys, written by hand. Also public for the server's webhook payloads, which carry
/// the same objects as the frames.
public struct JSONTextWriter: Sendable {
    public private(set) var text = ""

    public init() { text.reserveCapacity(256) }

    mutating func frame(_ frame: ServerFrame) {
        switch frame {
        case .ack(let id, let ack):
            raw("{\"data\":")
            ackData(ack)
            raw(",\"id\":")
            string(id.rawValue)
            raw(",\"request\":")
            string(ack.request.rawValue)
            raw(",\"type\":\"ack\"}")
        case .error(let id, let error):
            raw("{\"error\":")
            wireError(error)
            if let id {
                raw(",\"id\":")
                string(id.rawValue)
            }
            raw(",\"type\":\"error\"}")
        case .event(let event):
            raw("{\"data\":")
            eventData(event)
            raw(",\"event\":")
            string(event.name)
            raw(",\"type\":\"event\"}")
        }
    }

    private mutating func ackData(_ ack: Ack) {
        switch ack {
        case .send(let data), .recall(let data), .edit(let data), .createGroup(let data), .groupChange(let data),
            .requestReadReceipts(let data):
            sendAck(data)
        case .sync(let data):
            syncAck(data)
        case .history(let data):
            historyAck(data)
        case .deliver(let data):
            deliverAck(data)
        case .read(let state):
            readState(state)
        case .pushToken(let data):
            raw("{\"registered\":\(data.registered)}")
        case .typing(let data):
            raw("{\"expiresInMs\":\(data.expiresInMs),\"shown\":\(data.shown)}")
        case .ping(let data):
            raw("{\"serverTime\":\(data.serverTime.rawValue)}")
        // Cold payloads, written once per connection or per request of their own.
        case .connect, .readReceiptSettings, .unread, .groupMembers, .receiptCounts, .receiptList, .changeView,
            .typingSettings, .setAccountProfile, .accountProfiles, .react, .reactions, .reactionList:
            foundation(ack.data)
        }
    }

    private mutating func eventData(_ event: ServerEvent) {
        switch event {
        case .message(let data):
            messageEvent(data)
        case .delivered(let data):
            deliveredEvent(data)
        case .read(let data):
            readEvent(data)
        case .readState(let data):
            readStateEvent(data)
        case .groupReceipts(let data):
            // Hot for large groups: one event may name a thousand readers.
            raw("{\"conversation\":")
            string(data.conversation.rawValue)
            raw(",\"updates\":[")
            for (index, update) in data.updates.enumerated() {
                if index > 0 { raw(",") }
                groupReceiptUpdate(update)
            }
            raw("]}")
        case .syncRequired:
            raw("{}")
        case .view(let data):
            foundation(data)
        case .typing(let data):
            raw("{\"account\":")
            string(data.account.rawValue)
            raw(",\"active\":\(data.active),\"conversation\":")
            string(data.conversation.rawValue)
            raw(",\"expiresInMs\":\(data.expiresInMs)}")
        case .accountProfile(let data):
            foundation(data)
        case .reaction(let data):
            foundation(data)
        }
    }

    private mutating func groupReceiptUpdate(_ update: GroupReceiptUpdate) {
        raw("{")
        if let contents = update.contents {
            raw("\"contents\":")
            object(contents) { $0.string($1) }
            raw(",")
        }
        raw("\"messageId\":")
        string(update.messageID.rawValue)
        raw(",\"readCount\":\(update.readCount),\"readers\":")
        object(update.readers) { $0.raw(String($1.rawValue)) }
        raw(",\"seq\":\(update.seq.rawValue),\"unreadCount\":\(update.unreadCount)}")
    }

    /// A JSON object keyed by account, keys in `JSONEncoder`'s `.sortedKeys` order (UTF-8 bytes). Account ids are
    /// ASCII, for which `String`'s `<` is that order and much faster than comparing the UTF-8 views.
    private mutating func object<Value>(_ values: [AccountID: Value], value: (inout Self, Value) -> Void) {
        raw("{")
        let sorted = values.sorted { $0.key.rawValue < $1.key.rawValue }
        for (index, (key, item)) in sorted.enumerated() {
            if index > 0 { raw(",") }
            string(key.rawValue)
            raw(":")
            value(&self, item)
        }
        raw("}")
    }

    /// An object of strings with its keys sorted (as `JSONEncoder` with `.sortedKeys` writes it: by UTF-8 bytes).
    public mutating func stringMap(_ map: [String: String]) {
        raw("{")
        for (index, key) in map.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
            if index > 0 { raw(",") }
            string(key)
            raw(":")
            string(map[key]!)
        }
        raw("}")
    }

    public mutating func seqs(_ list: [Seq]) {
        raw("[")
        for (index, seq) in list.enumerated() {
            if index > 0 { raw(",") }
            raw(String(seq.rawValue))
        }
        raw("]")
    }

    /// Cold payloads (settings, counts) go through `JSONEncoder`, which writes the same sorted-key JSON.
    public mutating func foundation(_ value: some Encodable) {
        raw((try? FrameCoder().encode(value)) ?? "{}")
    }

    public mutating func raw(_ fragment: String) { text.append(fragment) }

    /// A JSON string literal: `"` and `\` escaped, control characters as short escapes or `\u00XX`.
    public mutating func string(_ value: String) {
        text.append("\"")
        let needsEscaping = value.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard needsEscaping else {
            text.append(value)
            text.append("\"")
            return
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text.append("\\\"")
            case "\\": text.append("\\\\")
            case "\n": text.append("\\n")
            case "\r": text.append("\\r")
            case "\t": text.append("\\t")
            case "\u{08}": text.append("\\b")
            case "\u{0C}": text.append("\\f")
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                text.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text.append("\"")
    }
}
