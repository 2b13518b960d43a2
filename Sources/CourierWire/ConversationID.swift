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

    /// The kind of conversation, or `nil` when the id is malformed.
    public var kind: ConversationKind? {
        if directMembers != nil { return .direct }
        if groupID != nil { return .group }
        return nil
    }

    /// The group of a well-formed group conversation id.
    public var groupID: GroupID? {
        guard rawValue.hasPrefix("g:") else { return nil }
        let group = GroupID(rawValue: String(rawValue.dropFirst(2)))
        return group.isValid ? group : nil
    }

    /// The two accounts of a well-formed direct conversation id (distinct, valid, in ascending order).
    public var directMembers: (AccountID, AccountID)? {
        let parts = rawValue.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "d" else { return nil }
        let first = AccountID(rawValue: String(parts[1]))
        let second = AccountID(rawValue: String(parts[2]))
        guard first.isValid, second.isValid, first < second else { return nil }
        return (first, second)
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

extension ConversationID: CodingKeyRepresentable {
    public var codingKey: any CodingKey { AnyKey(stringValue: rawValue) }
    public init?<T: CodingKey>(codingKey: T) { self.init(rawValue: codingKey.stringValue) }
}

struct AnyKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
