// Courier — Apache-2.0

/// A hand-written decoder for the client frames a server reads most — `send`, `read`, `deliver`, `unread` and `ping`
/// — as ``ServerFrameScanner`` is for the frames a device reads (frame decoding as cheap as the
/// hand-written encoding). Same contract: it reads only what it is sure of, and anything else — another frame, an
/// unusual number, a key out of order in `data`, a field of the wrong type — goes to `JSONDecoder`, which also says
/// what is wrong with a frame that is not right.
enum ClientFrameScanner {
    static func frame(_ text: some StringProtocol) -> ClientFrame? { JSONScanner.read(text) { try $0.clientFrame() } }

    /// The requests it reads.
    static let types: Set<FrameType> = [.send, .read, .deliver, .unread, .ping]
}

extension JSONScanner {
    /// A whole client frame. A client writes `type` and `id` first, then `data` (docs/protocol.md), so a type this
    /// scanner does not read is given up on before `data` is looked at.
    fileprivate mutating func clientFrame() throws -> ClientFrame {
        var type: FrameType?
        var id: String?
        var data: Int?
        try object(ordered: false) { scanner, key in
            if scanner.key(key, is: "type"), type == nil {
                let read = FrameType(rawValue: try scanner.string())
                guard ClientFrameScanner.types.contains(read) else { throw Unreadable() }
                type = read
            } else if scanner.key(key, is: "id"), id == nil {
                id = try scanner.string()
            } else if scanner.key(key, is: "data"), data == nil {
                data = scanner.index
                try scanner.skipValue()
            } else {
                throw Unreadable()  // a repeated key, or one this scanner does not know: JSONDecoder's
            }
        }
        try end()
        guard let type, let id else { throw Unreadable() }
        let request = RequestID(rawValue: id)
        switch type {
        case .unread: return .unread(request)
        case .ping: return .ping(request)
        default:
            guard let data else { throw Unreadable() }
            index = data
            switch type {
            case .send: return .send(request, try sendRequest())
            case .read: return .read(request, try readRequest())
            default: return .deliver(request, try deliverRequest())
            }
        }
    }
}
