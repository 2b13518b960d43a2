// Courier — Apache-2.0

/// A hand-written decoder for the server frames that carry messages — `sync` and `history` pages, the acks of sends,
/// recalls and group changes, and `message` events — the counterpart of ``JSONTextWriter``. `JSONDecoder` took 2.7 ms
/// per 500-message `sync` page on this project's 2-core machine, about half of a device's catch-up
/// (docs/benchmarks-history.md).
///
/// It reads only what it is sure of: strict JSON, integers without fraction or exponent, every field of the types
/// it knows. Anything else — another frame, a field of the wrong type, a number it does not read — makes it give up
/// (`nil`), and ``FrameCoder/decodeServerFrame(_:)`` decodes the frame with `JSONDecoder` as before, so what is
/// accepted and how a bad frame is refused do not change. Unknown fields are skipped, as `JSONDecoder` skips them.
enum ServerFrameScanner {
    static func frame(_ text: some StringProtocol) -> ServerFrame? { JSONScanner.read(text) { try $0.serverFrame() } }
}

extension JSONScanner {
    /// A whole server frame: `data` is passed over and read once `type` and `request` or `event` say what it is (the
    /// server writes the keys sorted, so `data` comes first).
    fileprivate mutating func serverFrame() throws -> ServerFrame {
        var data: Int?
        var type: String?
        var id: String?
        var request: String?
        var event: String?
        try object { scanner, key in
            if scanner.key(key, is: "data") {
                data = scanner.index
                try scanner.skipValue()
            } else if scanner.key(key, is: "type") {
                type = try scanner.string()
            } else if scanner.key(key, is: "id") {
                id = try scanner.string()
            } else if scanner.key(key, is: "request") {
                request = try scanner.string()
            } else if scanner.key(key, is: "event") {
                event = try scanner.string()
            } else {
                throw Unreadable()  // `error`, or a field this scanner does not know: JSONDecoder's
            }
        }
        try end()
        guard let data else { throw Unreadable() }
        index = data
        switch (type, request, event) {
        case ("ack", let request?, nil):
            guard let id else { throw Unreadable() }
            let ack: Ack
            switch FrameType(rawValue: request) {
            case .sync: ack = .sync(try syncAck())
            case .history: ack = .history(try historyAck())
            case .send: ack = .send(try sendAck())
            case .recall: ack = .recall(try sendAck())
            case .edit: ack = .edit(try sendAck())
            case .createGroup: ack = .createGroup(try sendAck())
            case .groupChange: ack = .groupChange(try sendAck())
            case .requestReadReceipts: ack = .requestReadReceipts(try sendAck())
            default: throw Unreadable()
            }
            return .ack(RequestID(rawValue: id), ack)
        case ("event", nil, "message"):
            return .event(.message(try messageEvent()))
        default:
            throw Unreadable()
        }
    }
}

/// Strict JSON over UTF-8 bytes, read in place: no tree is built, and a key is compared where it lies. Also read by the
/// server's history import (`@_spi(Scanning)`: not part of the SDK's API).
@_spi(Scanning) public struct JSONScanner {
    public struct Unreadable: Error { public init() {} }
    /// A key's bytes (without its quotes; keys with escapes are not read).
    public struct Key {
        let start: Int
        let count: Int
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// Objects and arrays open around the current position. Past ``maxDepth`` the scanner gives up: it reads
    /// recursively, and JSONDecoder refuses nesting deeper than 512 on its own terms.
    private var depth = 0
    static let maxDepth = 64

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    /// The next byte that is not space, not consumed.
    mutating func peek() throws -> UInt8 {
        skipSpace()
        guard index < bytes.count else { throw Unreadable() }
        return bytes[index]
    }

    mutating func consume(_ byte: UInt8) throws {
        guard try peek() == byte else { throw Unreadable() }
        index += 1
    }

    /// Only space may follow the frame.
    public mutating func end() throws {
        skipSpace()
        guard index == bytes.count else { throw Unreadable() }
    }

    /// Runs `read` over the UTF-8 bytes of `text` (copied once if they are not contiguous); `nil` when it gives up.
    public static func read<T>(_ text: some StringProtocol, _ read: (inout JSONScanner) throws -> T) -> T? {
        func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> T? {
            var scanner = JSONScanner(bytes)
            return try? read(&scanner)
        }
        if let value = text.utf8.withContiguousStorageIfAvailable(scan) { return value }
        var copy = String(text)
        return copy.withUTF8(scan)
    }

    private mutating func enter() throws {
        depth += 1
        guard depth <= Self.maxDepth else { throw Unreadable() }
    }

    /// Reads an object: `member` is called with each key, after its `:`, and must read the key's value.
    ///
    /// - Parameter ordered: Keys must come in ascending order, as the server and the SDK write them (`JSONTextWriter`,
    ///   `JSONEncoder` with sorted keys). That rules out a repeated key, which `JSONDecoder` reads its own way, for one
    ///   comparison per key; other orders are left to `JSONDecoder`. Without it, `member` refuses repeated keys it
    ///   reads, and ignores those of values it skips (as `JSONDecoder` does).
    public mutating func object(ordered: Bool = true, _ member: (inout JSONScanner, Key) throws -> Void) throws {
        try consume(UInt8(ascii: "{"))
        try enter()
        var previous: Key?
        var first = true
        while try peek() != UInt8(ascii: "}") {
            // After a comma a key must follow, so `{…,}` is refused.
            if !first { try consume(UInt8(ascii: ",")) }
            first = false
            try consume(Self.quote)
            let start = index
            while index < bytes.count, bytes[index] != Self.quote {
                guard bytes[index] != Self.backslash, bytes[index] >= 0x20 else { throw Unreadable() }
                index += 1
            }
            guard index < bytes.count else { throw Unreadable() }
            let key = Key(start: start, count: index - start)
            if ordered, let previous, !precedes(previous, key) { throw Unreadable() }
            previous = key
            index += 1
            try consume(UInt8(ascii: ":"))
            try member(&self, key)
        }
        index += 1
        depth -= 1
    }

    /// Whether key `a` sorts strictly before key `b`, byte by byte.
    private func precedes(_ a: Key, _ b: Key) -> Bool {
        for offset in 0..<min(a.count, b.count) {
            let (x, y) = (bytes[a.start + offset], bytes[b.start + offset])
            if x != y { return x < y }
        }
        return a.count < b.count
    }

    /// Reads the elements of an array with `element`, whatever their number.
    public mutating func array<T>(_ element: (inout JSONScanner) throws -> T) throws -> [T] {
        try consume(UInt8(ascii: "["))
        try enter()
        var elements: [T] = []
        if try peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return elements
        }
        while true {
            elements.append(try element(&self))
            let next = try peek()
            index += 1
            if next == UInt8(ascii: "]") {
                depth -= 1
                return elements
            }
            guard next == UInt8(ascii: ",") else { throw Unreadable() }
        }
    }

    /// A key's text (keys with escapes are not read, so its bytes are its text).
    public func text(of key: Key) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[key.start..<key.start + key.count]), as: UTF8.self)
    }

    public func key(_ key: Key, is name: StaticString) -> Bool {
        guard key.count == name.utf8CodeUnitCount else { return false }
        let literal = name.utf8Start
        for offset in 0..<key.count where bytes[key.start + offset] != literal[offset] { return false }
        return true
    }

    /// Consumes `null` if it comes next.
    public mutating func null() throws -> Bool {
        guard try peek() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    private mutating func literal(_ word: StaticString) throws {
        guard bytes.count - index >= word.utf8CodeUnitCount else { throw Unreadable() }
        for offset in 0..<word.utf8CodeUnitCount where bytes[index + offset] != word.utf8Start[offset] {
            throw Unreadable()
        }
        index += word.utf8CodeUnitCount
    }

    public mutating func bool() throws -> Bool {
        switch try peek() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default:
            throw Unreadable()
        }
    }

    /// An integer: digits, maybe a leading minus, no fraction or exponent (those are left to `JSONDecoder`).
    public mutating func int64() throws -> Int64 {
        _ = try peek()
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        var value: Int64 = 0
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
            let (times, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowedAgain) = times.addingReportingOverflow(Int64(bytes[index] - 0x30))
            guard !overflowed, !overflowedAgain else { throw Unreadable() }
            value = sum
            index += 1
        }
        guard index > start, index - start == 1 || bytes[start] != 0x30 else { throw Unreadable() }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): throw Unreadable()
            default: break
            }
        }
        return negative ? -value : value
    }

    public mutating func string() throws -> String {
        try consume(Self.quote)
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == Self.quote {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            guard byte != Self.backslash else { return try escapedString(from: start) }
            guard byte >= 0x20 else { throw Unreadable() }
            index += 1
        }
        throw Unreadable()
    }

    /// The rest of a string that has escapes, from its first byte at `start`.
    private mutating func escapedString(from start: Int) throws -> String {
        var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case Self.quote:
                return String(decoding: utf8, as: UTF8.self)
            case Self.backslash:
                guard index < bytes.count else { throw Unreadable() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate must be followed by `\u` and a low one.
                        try literal("\\u")
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw Unreadable() }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Unreadable() }
                    utf8.append(contentsOf: String(Character(unicode)).utf8)
                default:
                    throw Unreadable()
                }
            default:
                guard byte >= 0x20 else { throw Unreadable() }
                utf8.append(byte)
            }
        }
        throw Unreadable()
    }

    private mutating func hex4() throws -> UInt32 {
        guard bytes.count - index >= 4 else { throw Unreadable() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw Unreadable()
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// Skips one value of any kind (checked as strictly as it is read).
    public mutating func skipValue() throws {
        switch try peek() {
        case UInt8(ascii: "{"):
            try object(ordered: false) { scanner, _ in try scanner.skipValue() }
        case UInt8(ascii: "["):
            _ = try array { try $0.skipValue() }
        case Self.quote:
            _ = try string()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try bool()
        case UInt8(ascii: "n"):
            try literal("null")
        default:
            try skipNumber()
        }
    }

    /// Any JSON number: `-? int frac? exp?`.
    private mutating func skipNumber() throws {
        func digits(_ scanner: inout JSONScanner) throws {
            let start = scanner.index
            while scanner.index < scanner.bytes.count, (0x30...0x39).contains(scanner.bytes[scanner.index]) {
                scanner.index += 1
            }
            guard scanner.index > start else { throw Unreadable() }
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw Unreadable() }
        if bytes[index] == 0x30 { index += 1 } else { try digits(&self) }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            try digits(&self)
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            try digits(&self)
        }
    }
}
