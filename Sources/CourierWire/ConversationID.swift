// Courier — Apache-2.0

/// A conversation: `direct` between exactly two accounts, or `group` (a group id with members).
///
/// On the wire it is a string: `d:ACCOUNT_A:ACCOUNT_B` for a direct conversation, with the two account ids in
/// ascending order so that both participants name it the same way (account ids cannot contain `:`), and
/// `g:GROUP` for a group.
public struct ConversationID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }

    /// The direct conversation between two accounts (the order of the arguments does not matter).
    public static func direct(_ one: AccountID, _ other: AccountID) -> ConversationID {
        let (low, high) = one < other ? (one, other) : (other, one)
        return ConversationID(rawValue: "d:\(low.rawValue):\(high.rawValue)")
    }

    /// The conversation of a group.
    public static func group(_ group: GroupID) -> ConversationID {
        ConversationID(rawValue: "g:\(group.rawValue)")
    }

    /// The kind of conversation, or `nil` when the id is malformed. (One pass over the bytes, no allocation: a store's
    /// every write asks.)
    public var kind: ConversationKind? {
        switch Self.shape(of: rawValue) {
        case .direct: .direct
        case .group: .group
        case nil: nil
        }
    }

    /// The group of a well-formed group conversation id.
    public var groupID: GroupID? {
        guard case .group = Self.shape(of: rawValue) else { return nil }
        return GroupID(rawValue: String(rawValue.utf8.dropFirst(2))!)
    }

    /// The two accounts of a well-formed direct conversation id (distinct, valid, in ascending order).
    public var directMembers: (AccountID, AccountID)? {
        guard case .direct(let colon) = Self.shape(of: rawValue) else { return nil }
        let utf8 = rawValue.utf8
        let second = utf8.index(utf8.startIndex, offsetBy: colon)
        return (
            AccountID(rawValue: String(utf8[utf8.index(utf8.startIndex, offsetBy: 2)..<second])!),
            AccountID(rawValue: String(utf8[utf8.index(after: second)...])!)
        )
    }

    private enum Shape {
        /// `d:A:B`, the second colon at this byte offset.
        case direct(Int)
        case group
    }

    /// What a well-formed id is, checked byte by byte: `d:` and two valid account ids in ascending order, or `g:` and a
    /// valid group id; `nil` for anything else.
    private static func shape(of id: String) -> Shape? {
        var id = id
        return id.withUTF8 { bytes -> Shape? in
            guard bytes.count >= 3, bytes[1] == UInt8(ascii: ":") else { return nil }
            func valid(_ range: Range<Int>) -> Bool {
                !range.isEmpty && range.count <= 128 && range.allSatisfy { Identifier.allows(bytes[$0]) }
            }
            switch bytes[0] {
            case UInt8(ascii: "g"):
                return valid(2..<bytes.count) ? .group : nil
            case UInt8(ascii: "d"):
                guard let colon = (2..<bytes.count).first(where: { bytes[$0] == UInt8(ascii: ":") }),
                    valid(2..<colon), valid(colon + 1..<bytes.count)
                else { return nil }
                // Ascending: the first id sorts before the second (byte order, as String's for these characters).
                let first = bytes[2..<colon], second = bytes[(colon + 1)...]
                guard first.lexicographicallyPrecedes(second) else { return nil }
                return .direct(colon)
            default:
                return nil
            }
        }
    }

    /// The other participant of a direct conversation, seen from `account`.
    public func peer(of account: AccountID) -> AccountID? {
        guard let (first, second) = directMembers else { return nil }
        if account == first { return second }
        if account == second { return first }
        return nil
    }
}

/// The kind of a conversation.
public enum ConversationKind: String, Hashable, Sendable, Codable {
    case direct
    case group
}

// A dictionary keyed by conversation is a JSON object (the standard library's default for string raw values).
extension ConversationID: CodingKeyRepresentable {}
