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
            raw("{\"error\":{\"code\":")
            string(error.code.rawValue)
            raw(",\"message\":")
            string(error.message)
            raw("}")
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
        case .connect(let data):
            raw("{\"account\":")
            string(data.account.rawValue)
            raw(",\"device\":")
            string(data.device.rawValue)
            raw(
                ",\"limits\":{\"maxBodyBytes\":\(data.limits.maxBodyBytes),\"maxFrameBytes\":\(data.limits.maxFrameBytes)"
            )
            raw(",\"maxPageSize\":\(data.limits.maxPageSize)")
            if let window = data.limits.managerRecallWindowMilliseconds {
                raw(",\"managerRecallWindowMilliseconds\":\(window)")
            }
            if let inFlight = data.limits.maxRequestsInFlight { raw(",\"maxRequestsInFlight\":\(inFlight)") }
            if let bytes = data.limits.outboundQueueBytes { raw(",\"outboundQueueBytes\":\(bytes)") }
            raw(",\"outboundQueueFrames\":\(data.limits.outboundQueueFrames)")
            if let window = data.limits.recallWindowMilliseconds { raw(",\"recallWindowMilliseconds\":\(window)") }
            raw("}")
            raw(",\"readReceiptPolicy\":")
            string(data.readReceiptPolicy.rawValue)
            raw(",\"serverTime\":\(data.serverTime.rawValue)}")
        case .send(let data), .recall(let data), .createGroup(let data), .groupChange(let data),
            .requestReadReceipts(let data):
            raw("{\"duplicate\":\(data.duplicate),\"message\":")
            message(data.message)
            raw("}")
        case .sync(let data):
            raw("{\"conversations\":[")
            for (index, conversation) in data.conversations.enumerated() {
                if index > 0 { raw(",") }
                conversationState(conversation)
            }
            raw("],\"hasMore\":\(data.hasMore),\"messages\":")
            messages(data.messages)
            if let since = data.since {
                raw(",\"since\":")
                string(since)
            }
            raw("}")
        case .history(let data):
            raw("{\"hasMore\":\(data.hasMore),\"messages\":")
            messages(data.messages)
            raw("}")
        case .deliver(let data):
            raw("{\"conversation\":")
            string(data.conversation.rawValue)
            raw(",\"watermark\":")
            watermark(data.watermark)
            raw("}")
        case .read(let state):
            readState(state)
        case .readReceiptSettings(let data):
            foundation(data)
        case .unread(let data):
            foundation(data)
        case .groupMembers(let data):
            foundation(data)
        case .receiptCounts(let data):
            foundation(data)
        case .receiptList(let data):
            foundation(data)
        case .pushToken(let data):
            raw("{\"registered\":\(data.registered)}")
        case .changeView(let data):
            foundation(data)
        case .ping(let data):
            raw("{\"serverTime\":\(data.serverTime.rawValue)}")
        }
    }

    private mutating func eventData(_ event: ServerEvent) {
        switch event {
        case .message(let data):
            raw("{\"message\":")
            message(data.message)
            raw("}")
        case .delivered(let data):
            raw("{\"account\":")
            string(data.account.rawValue)
            raw(",\"conversation\":")
            string(data.conversation.rawValue)
            raw(",\"watermark\":")
            watermark(data.watermark)
            raw("}")
        case .read(let data):
            raw("{\"account\":")
            string(data.account.rawValue)
            raw(",\"conversation\":")
            string(data.conversation.rawValue)
            raw(",\"readSeqs\":")
            seqs(data.readSeqs)
            raw(",\"watermark\":")
            watermark(data.watermark)
            raw("}")
        case .readState(let data):
            raw("{\"cause\":")
            string(data.cause.rawValue)
            raw(",\"state\":")
            readState(data.state)
            raw("}")
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

    private mutating func readState(_ state: ReadState) {
        raw("{\"conversation\":")
        string(state.conversation.rawValue)
        raw(",\"readSeqs\":")
        seqs(state.readSeqs)
        raw(",\"unreadCount\":\(state.unreadCount),\"watermark\":")
        watermark(state.watermark)
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
    private mutating func foundation(_ value: some Encodable) {
        raw((try? FrameCoder().encode(value)) ?? "{}")
    }

    private mutating func messages(_ list: [WireMessage]) {
        raw("[")
        for (index, item) in list.enumerated() {
            if index > 0 { raw(",") }
            message(item)
        }
        raw("]")
    }

    public mutating func message(_ message: WireMessage) {
        raw("{\"body\":")
        string(message.body)
        raw(",\"clientId\":")
        string(message.clientID.rawValue)
        raw(",\"conversation\":")
        string(message.conversation.rawValue)
        if let ext = message.ext {
            raw(",\"ext\":")
            stringMap(ext)
        }
        if let group = message.group {
            raw(",\"group\":")
            foundation(group)
        }
        raw(",\"id\":")
        string(message.id.rawValue)
        if let needsReadReceipt = message.needsReadReceipt { raw(",\"needsReadReceipt\":\(needsReadReceipt)") }
        if let quote = message.quote {
            raw(",\"quote\":")
            string(quote)
        }
        if let recall = message.recall {
            raw(",\"recall\":")
            foundation(recall)
        }
        if let recalled = message.recalled { raw(",\"recalled\":\(recalled)") }
        if let receiptRequest = message.receiptRequest {
            raw(",\"receiptRequest\":")
            string(receiptRequest.rawValue)
        }
        if let replyTo = message.replyTo {
            raw(",\"replyTo\":")
            string(replyTo.rawValue)
        }
        raw(",\"sender\":")
        string(message.sender.rawValue)
        raw(",\"seq\":\(message.seq.rawValue),\"time\":\(message.time.rawValue)")
        if let type = message.type {
            raw(",\"type\":")
            string(type)
        }
        raw("}")
    }

    private mutating func conversationState(_ state: ConversationState) {
        raw("{")
        if let group = state.group {
            raw("\"group\":")
            foundation(group)
            raw(",")
        }
        raw("\"id\":")
        string(state.id.rawValue)
        raw(",\"kind\":")
        string(state.kind.rawValue)
        raw(",\"lastSeq\":\(state.lastSeq.rawValue),\"lastTime\":\(state.lastTime.rawValue),\"members\":[")
        for (index, member) in state.members.enumerated() {
            if index > 0 { raw(",") }
            string(member.rawValue)
        }
        raw("],\"receipts\":[")
        for (index, receipts) in state.receipts.enumerated() {
            if index > 0 { raw(",") }
            raw("{\"account\":")
            string(receipts.account.rawValue)
            raw(",\"delivered\":")
            watermark(receipts.delivered)
            raw(",\"read\":")
            watermark(receipts.read)
            raw(",\"readSeqs\":")
            seqs(receipts.readSeqs)
            raw("}")
        }
        raw("]")
        if let syncFrom = state.syncFrom { raw(",\"syncFrom\":\(syncFrom.rawValue)") }
        if let unreadCount = state.unreadCount { raw(",\"unreadCount\":\(unreadCount)") }
        if let view = state.view {
            raw(",\"view\":")
            foundation(view)
        }
        raw("}")
    }

    public mutating func watermark(_ watermark: Watermark) {
        raw("{\"seq\":\(watermark.seq.rawValue),\"time\":\(watermark.time.rawValue)}")
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
