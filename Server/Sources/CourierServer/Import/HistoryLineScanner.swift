// Courier — Apache-2.0
internal import Foundation

extension HistoryRecord.Line {
    /// The line's fields, read by a scanner for the common shape of a history line — one flat JSON object of the known
    /// fields, whose values are strings, integers, booleans, `null`, a list of strings (`accounts`) or an object of
    /// strings (`ext`) — or `nil` for anything else: an unknown field, a duplicate, a number that is not an integer, a
    /// string that is not valid UTF-8, malformed JSON. `nil` sends the line to `JSONDecoder`, which reads it (or says
    /// why it cannot) as before; where the scanner answers, it answers what `JSONDecoder` would (`HistoryLineScannerTests`
    /// checks both on the same lines). The decoder was most of an import's parsing (ADR 0031).
    static func scan(_ text: Substring) -> Self? {
        var text = text
        return text.withUTF8 { bytes in
            var scanner = HistoryLineScanner(bytes: bytes)
            return scanner.line()
        }
    }
}

/// A one-pass reader of one flat JSON object (see ``HistoryRecord/Line/scan(_:)``); every method answers `nil` for
/// what it does not read.
private struct HistoryLineScanner {
    struct Fields {
        var kind: String??
        var id: String??, group: String??, action: String??, by: String??, role: String??, from: String??
        var to: String??, type: String??, body: String??, replyTo: String??, account: String??, with: String??
        var upTo: String??, message: String??
        var createdAt: Int64??, time: Int64??
        var needsReadReceipt: Bool??, `private`: Bool??
        var accounts: [String]??
        var ext: [String: String]??
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    mutating func line() -> HistoryRecord.Line? {
        var fields = Fields()
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        skipSpace()
        if !take(UInt8(ascii: "}")) {
            repeat {
                skipSpace()
                guard let key = string() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard field(key, into: &fields) else { return nil }
                skipSpace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
        }
        skipSpace()
        guard index == bytes.count, case .some(.some(let kind)) = fields.kind else { return nil }
        func value<T>(_ field: T??) -> T? { field ?? nil }
        return HistoryRecord.Line(
            kind: kind, id: value(fields.id), createdAt: value(fields.createdAt), group: value(fields.group),
            action: value(fields.action), by: value(fields.by), accounts: value(fields.accounts),
            role: value(fields.role), time: value(fields.time), from: value(fields.from), to: value(fields.to),
            type: value(fields.type), body: value(fields.body), ext: value(fields.ext), replyTo: value(fields.replyTo),
            needsReadReceipt: value(fields.needsReadReceipt), account: value(fields.account), with: value(fields.with),
            upTo: value(fields.upTo), private: value(fields.private), message: value(fields.message)
        )
    }

    /// Reads the value of field `key` into `fields`; `false` for an unknown or repeated field or a value of another
    /// type than the field's.
    private mutating func field(_ key: String, into fields: inout Fields) -> Bool {
        func text(_ slot: inout String??) -> Bool {
            guard slot == nil else { return false }
            if literal("null") { slot = .some(nil); return true }
            guard let value = string() else { return false }
            slot = .some(value)
            return true
        }
        func number(_ slot: inout Int64??) -> Bool {
            guard slot == nil else { return false }
            if literal("null") { slot = .some(nil); return true }
            guard let value = integer() else { return false }
            slot = .some(value)
            return true
        }
        func flag(_ slot: inout Bool??) -> Bool {
            guard slot == nil else { return false }
            if literal("null") { slot = .some(nil); return true }
            if literal("true") { slot = .some(true); return true }
            if literal("false") { slot = .some(false); return true }
            return false
        }
        switch key {
        case "kind":
            // Not optional: `null` is the decoder's to refuse.
            guard fields.kind == nil, let value = string() else { return false }
            fields.kind = .some(value)
            return true
        case "id": return text(&fields.id)
        case "group": return text(&fields.group)
        case "action": return text(&fields.action)
        case "by": return text(&fields.by)
        case "role": return text(&fields.role)
        case "from": return text(&fields.from)
        case "to": return text(&fields.to)
        case "type": return text(&fields.type)
        case "body": return text(&fields.body)
        case "replyTo": return text(&fields.replyTo)
        case "account": return text(&fields.account)
        case "with": return text(&fields.with)
        case "upTo": return text(&fields.upTo)
        case "message": return text(&fields.message)
        case "createdAt": return number(&fields.createdAt)
        case "time": return number(&fields.time)
        case "needsReadReceipt": return flag(&fields.needsReadReceipt)
        case "private": return flag(&fields.private)
        case "accounts":
            guard fields.accounts == nil else { return false }
            if literal("null") { fields.accounts = .some(nil); return true }
            guard let list = strings() else { return false }
            fields.accounts = .some(list)
            return true
        case "ext":
            guard fields.ext == nil else { return false }
            if literal("null") { fields.ext = .some(nil); return true }
            guard let object = object() else { return false }
            fields.ext = .some(object)
            return true
        default:
            return false
        }
    }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        // A literal ends where a value may end.
        if index + count < bytes.count, !" \t\r\n,}]".utf8.contains(bytes[index + count]) { return false }
        index += count
        return true
    }

    /// A JSON integer (no fraction, no exponent) that fits in 64 bits.
    private mutating func integer() -> Int64? {
        let negative = take(UInt8(ascii: "-"))
        let digits = index
        var value: Int64 = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
            index += 1
        }
        // Digits; no leading zero before another digit; nothing of a fraction or an exponent after them.
        guard index > digits, !(bytes[digits] == UInt8(ascii: "0") && index - digits > 1) else { return nil }
        if index < bytes.count, ".eE".utf8.contains(bytes[index]) { return nil }
        return negative ? -value : value
    }

    /// A JSON string: its escapes decoded, `nil` for a control character, a bad escape, a lone surrogate or bytes that
    /// are not UTF-8.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        // Fast: no escape.
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
            guard bytes[index] >= 0x20 else { return nil }
            index += 1
        }
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "\"") {
            defer { index += 1 }
            return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate must be followed by an escaped low one.
                        guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(),
                            (0xDC00...0xDFFF).contains(low)
                        else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        return nil
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    decoded += Array(String(Character(unicode)).utf8)
                default:
                    return nil
                }
            default:
                guard byte >= 0x20 else { return nil }
                decoded.append(byte)
            }
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// `[ "…", … ]`.
    private mutating func strings() -> [String]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var list: [String] = []
        skipSpace()
        if take(UInt8(ascii: "]")) { return list }
        repeat {
            skipSpace()
            guard let value = string() else { return nil }
            list.append(value)
            skipSpace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]")) ? list : nil
    }

    /// `{ "…": "…", … }`, no key twice.
    private mutating func object() -> [String: String]? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var object: [String: String] = [:]
        skipSpace()
        if take(UInt8(ascii: "}")) { return object }
        repeat {
            skipSpace()
            guard let key = string() else { return nil }
            skipSpace()
            guard take(UInt8(ascii: ":")) else { return nil }
            skipSpace()
            guard let value = string(), object.updateValue(value, forKey: key) == nil else { return nil }
            skipSpace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}")) ? object : nil
    }
}
