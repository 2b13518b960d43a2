// Courier — Apache-2.0
@_spi(Scanning) internal import CourierWire

extension HistoryRecord.Line {
    /// The line's fields, read with the wire's JSON scanner (`JSONScanner`, which reads server frames in the SDK) for
    /// the common shape of a history line — one object of the known fields, whose values are strings, integers,
    /// booleans, `null`, a list of strings (`accounts`) or an object of strings (`ext`) — or `nil` for anything else: a
    /// repeated field, a number that is not an integer, a key with an escape, malformed JSON. `nil` sends the line to
    /// `JSONDecoder`, which reads it (or says why it cannot) as before; where the scanner answers, it answers what
    /// `JSONDecoder` would (`HistoryLineScannerTests` checks both on the same lines). Unknown fields are skipped, as
    /// the decoder skips them. The decoder was most of an import's parsing (ADR 0031).
    static func scan(_ text: Substring) -> Self? {
        JSONScanner.read(text) { scanner in try scanner.historyLine() }
    }
}

extension JSONScanner {
    fileprivate mutating func historyLine() throws -> HistoryRecord.Line {
        var kind: String?
        var id: String??, group: String??, action: String??, by: String??, role: String??, from: String??
        var to: String??, type: String??, body: String??, replyTo: String??, account: String??, with: String??
        var upTo: String??, message: String??
        var createdAt: Int64??, time: Int64??
        var needsReadReceipt: Bool??, isPrivate: Bool??
        var accounts: [String]??
        var ext: [String: String]??
        /// Reads an optional field once (`null` is absent); a repeated one is left to the decoder.
        func once<T>(_ slot: inout T??, _ scanner: inout JSONScanner, _ read: (inout JSONScanner) throws -> T) throws {
            guard slot == nil else { throw Unreadable() }
            slot = .some(try scanner.null() ? nil : read(&scanner))
        }
        try object(ordered: false) { scanner, key in
            if scanner.key(key, is: "kind") {
                guard kind == nil else { throw Unreadable() }
                kind = try scanner.string()  // `null` is the decoder's to refuse
            } else if scanner.key(key, is: "id") {
                try once(&id, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "group") {
                try once(&group, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "action") {
                try once(&action, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "by") {
                try once(&by, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "role") {
                try once(&role, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "from") {
                try once(&from, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "to") {
                try once(&to, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "type") {
                try once(&type, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "body") {
                try once(&body, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "replyTo") {
                try once(&replyTo, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "account") {
                try once(&account, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "with") {
                try once(&with, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "upTo") {
                try once(&upTo, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "message") {
                try once(&message, &scanner) { try $0.string() }
            } else if scanner.key(key, is: "createdAt") {
                try once(&createdAt, &scanner) { try $0.int64() }
            } else if scanner.key(key, is: "time") {
                try once(&time, &scanner) { try $0.int64() }
            } else if scanner.key(key, is: "needsReadReceipt") {
                try once(&needsReadReceipt, &scanner) { try $0.bool() }
            } else if scanner.key(key, is: "private") {
                try once(&isPrivate, &scanner) { try $0.bool() }
            } else if scanner.key(key, is: "accounts") {
                try once(&accounts, &scanner) { try $0.array { try $0.string() } }
            } else if scanner.key(key, is: "ext") {
                try once(&ext, &scanner) { scanner in
                    var object: [String: String] = [:]
                    try scanner.object(ordered: false) { scanner, key in
                        // A repeated key is left to the decoder.
                        guard object.updateValue(try scanner.string(), forKey: scanner.text(of: key)) == nil else {
                            throw Unreadable()
                        }
                    }
                    return object
                }
            } else if scanner.key(key, is: "profile") || scanner.key(key, is: "displayName")
                || scanner.key(key, is: "avatar")
            {
                throw Unreadable()  // a profile (rare: a group's change, an account's line): the decoder's
            } else {
                try scanner.skipValue()
            }
        }
        try end()
        guard let kind else { throw Unreadable() }
        func value<T>(_ field: T??) -> T? { field ?? nil }
        let (lineID, lineGroup, lineAction, lineBy, lineRole): (String?, String?, String?, String?, String?) = (
            value(id), value(group), value(action), value(by), value(role)
        )
        let (lineFrom, lineTo, lineType, lineBody, lineReplyTo): (String?, String?, String?, String?, String?) = (
            value(from), value(to), value(type), value(body), value(replyTo)
        )
        let (lineAccount, lineWith, lineUpTo, lineMessage): (String?, String?, String?, String?) = (
            value(account), value(with), value(upTo), value(message)
        )
        let (lineCreatedAt, lineTime): (Int64?, Int64?) = (value(createdAt), value(time))
        let (lineNeedsReceipt, linePrivate): (Bool?, Bool?) = (value(needsReadReceipt), value(isPrivate))
        let lineAccounts: [String]? = value(accounts)
        let lineExt: [String: String]? = value(ext)
        return HistoryRecord.Line(
            kind: kind, id: lineID, createdAt: lineCreatedAt, group: lineGroup, action: lineAction, by: lineBy,
            accounts: lineAccounts, role: lineRole, profile: nil, time: lineTime, from: lineFrom, to: lineTo,
            type: lineType, body: lineBody, ext: lineExt, replyTo: lineReplyTo, needsReadReceipt: lineNeedsReceipt,
            account: lineAccount, with: lineWith, upTo: lineUpTo, private: linePrivate, message: lineMessage,
            displayName: nil, avatar: nil
        )
    }
}
