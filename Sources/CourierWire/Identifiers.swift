// Courier — Apache-2.0

/// An account: a user id issued by the app's own backend (1–128 characters of `[A-Za-z0-9._@-]`).
public struct AccountID: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether the id has the length and characters the protocol allows (SPEC §1).
    public var isValid: Bool { Identifier.isValid(rawValue, maxLength: 128) }
}

/// One logged-in client of an account. Chosen by the client; the SDK keeps a random one per local store.
public struct DeviceID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
    /// Whether the id has the length and characters the protocol allows.
    public var isValid: Bool { Identifier.isValid(rawValue, maxLength: 128) }
}

/// A server-assigned, globally unique message id.
public struct MessageID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
}

/// A sender-chosen idempotency key: sending the same `(sender, clientId)` twice yields one message.
public struct ClientMessageID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
    /// Whether the id has the length and characters the protocol allows (1–128 of `[A-Za-z0-9._@:-]`).
    public var isValid: Bool { Identifier.isValid(rawValue, maxLength: 128, extra: UInt8(ascii: ":")) }
}

/// A client-chosen id of one request; the server echoes it in the one `ack` or `error` it answers with.
public struct RequestID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
}

enum Identifier {
    static func isValid(_ value: String, maxLength: Int, extra: UInt8? = nil) -> Bool {
        !value.isEmpty && value.utf8.count <= maxLength && value.utf8.allSatisfy { allows($0) || $0 == extra }
    }

    /// A byte of `[A-Za-z0-9._@-]`, what account and group ids are made of.
    static func allows(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "@"),
            UInt8(ascii: "-"):
            true
        default: false
        }
    }
}

/// A group (NIM "team"): 1–128 characters of `[A-Za-z0-9._@-]`, chosen by whoever creates it (the app's backend or a
/// client, e.g. a UUID). Its conversation is ``ConversationID/group(_:)``.
public struct GroupID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
    /// Whether the id has the length and characters the protocol allows.
    public var isValid: Bool { Identifier.isValid(rawValue, maxLength: 128) }
}

extension AccountID: CodingKeyRepresentable {}
