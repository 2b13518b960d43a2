// Courier — Apache-2.0

/// A hand-written decoder for the client frames a server reads most — `send`, `read`, `deliver`, `unread` and `ping`
/// — as ``ServerFrameScanner`` is for the frames a device reads (issue 19: frame decoding as cheap as the
/// hand-written encoding). Same contract: it reads only what it is sure of, and anything else — another frame, an
/// unusual number, a key out of order in `data`, a field of the wrong type — goes to `JSONDecoder`, which also says
/// what is wrong with a frame that is not right.
enum ClientFrameScanner {
    static func frame(_ text: some StringProtocol) -> ClientFrame? {
        if let frame = text.utf8.withContiguousStorageIfAvailable({ try? frame(in: $0) }) { return frame }
        var copy = String(text)
        return copy.withUTF8 { try? frame(in: $0) }
    }

    private static func frame(in bytes: UnsafeBufferPointer<UInt8>) throws -> ClientFrame? {
        var scanner = JSONScanner(bytes)
        var type: String?
        var id: String?
        var data: Int?
        // A client writes `type` and `id` first, then `data` (docs/protocol.md): each at most once, in any order.
        try scanner.beginObject()
        var first = true
        while try scanner.peek() != UInt8(ascii: "}") {
            if !first { try scanner.consume(UInt8(ascii: ",")) }
            first = false
            var none: JSONScanner.Key?
            guard let key = try scanner.nextKey(&none) else { throw JSONScanner.Unreadable() }
            if scanner.key(key, is: "type"), type == nil {
                type = try scanner.string()
            } else if scanner.key(key, is: "id"), id == nil {
                id = try scanner.string()
            } else if scanner.key(key, is: "data"), data == nil {
                data = scanner.index
                try scanner.skipValue()
            } else {
                return nil
            }
        }
        scanner.index += 1
        try scanner.end()
        guard let type, let id else { return nil }
        let request = RequestID(rawValue: id)
        switch FrameType(rawValue: type) {
        case .unread: return .unread(request)
        case .ping: return .ping(request)
        case .send, .read, .deliver:
            guard let data else { return nil }
            scanner.index = data
            switch FrameType(rawValue: type) {
            case .send: return .send(request, try scanner.sendRequest())
            case .read: return .read(request, try scanner.readRequest())
            default: return .deliver(request, try scanner.deliverRequest())
            }
        default:
            return nil
        }
    }
}

extension JSONScanner {
    mutating func sendRequest() throws -> SendRequest {
        var conversation: String?, clientID: String?, body: String?
        var type: String?, replyTo: String?
        var needsReadReceipt: Bool?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "body") {
                body = try string()
            } else if self.key(key, is: "clientId") {
                clientID = try string()
            } else if self.key(key, is: "conversation") {
                conversation = try string()
            } else if self.key(key, is: "type") {
                type = try optionalString()
            } else if self.key(key, is: "replyTo") {
                replyTo = try optionalString()
            } else if self.key(key, is: "needsReadReceipt") {
                needsReadReceipt = try null() ? nil : bool()
            } else {
                try skipValue()
            }
        }
        guard let conversation, let clientID, let body else { throw Unreadable() }
        return SendRequest(
            conversation: ConversationID(rawValue: conversation),
            clientID: ClientMessageID(rawValue: clientID),
            type: type,
            body: body,
            replyTo: replyTo.map(MessageID.init(rawValue:)),
            needsReadReceipt: needsReadReceipt
        )
    }

    mutating func readRequest() throws -> ReadRequest {
        var conversation: String?
        var messageIDs: [MessageID]?
        var seq: Int64?, time: Int64?
        var all: Bool?, isPrivate: Bool?
        var content: String?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "conversation") {
                conversation = try string()
            } else if self.key(key, is: "messageIds") {
                messageIDs = try null() ? nil : array { MessageID(rawValue: try $0.string()) }
            } else if self.key(key, is: "seq") {
                seq = try null() ? nil : int64()
            } else if self.key(key, is: "time") {
                time = try null() ? nil : int64()
            } else if self.key(key, is: "all") {
                all = try null() ? nil : bool()
            } else if self.key(key, is: "private") {
                isPrivate = try null() ? nil : bool()
            } else if self.key(key, is: "content") {
                content = try optionalString()
            } else {
                try skipValue()
            }
        }
        guard let conversation else { throw Unreadable() }
        return ReadRequest(
            conversation: ConversationID(rawValue: conversation),
            messageIDs: messageIDs,
            seq: seq.map { Seq($0) },
            time: time.map { Timestamp(milliseconds: $0) },
            all: all,
            isPrivate: isPrivate,
            content: content
        )
    }

    mutating func deliverRequest() throws -> DeliverRequest {
        var conversation: String?
        var seq: Int64?
        var messageID: String?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "conversation") {
                conversation = try string()
            } else if self.key(key, is: "seq") {
                seq = try null() ? nil : int64()
            } else if self.key(key, is: "messageId") {
                messageID = try optionalString()
            } else {
                try skipValue()
            }
        }
        guard let conversation else { throw Unreadable() }
        return DeliverRequest(
            conversation: ConversationID(rawValue: conversation),
            seq: seq.map { Seq($0) },
            messageID: messageID.map(MessageID.init(rawValue:))
        )
    }
}
