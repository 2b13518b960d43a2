// Courier — Apache-2.0

/// A message's position in its conversation: 1, 2, 3 … without gaps, assigned by the server inside the commit.
/// On the wire, a JSON number.
public struct Seq: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ value: Int64) { self.rawValue = value }
    public init(integerLiteral value: Int64) { self.rawValue = value }
    public var description: String { String(rawValue) }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The position before the first message.
    public static let zero = Seq(0)
    /// The next position.
    public var next: Seq { Seq(rawValue + 1) }
}

/// Server time in milliseconds since the Unix epoch. On the wire, a JSON number.
public struct Timestamp: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(milliseconds: Int64) { self.rawValue = milliseconds }
    public init(integerLiteral value: Int64) { self.rawValue = value }
    public var description: String { String(rawValue) }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public static let zero = Timestamp(milliseconds: 0)
}

/// A high-water mark in a conversation's log: everything up to `seq` is delivered (or read), reached at `time`.
///
/// Watermarks never move backwards; the stores enforce that in SQL (`… WHERE seq < new`).
public struct Watermark: Hashable, Sendable, Codable {
    public let seq: Seq
    public let time: Timestamp
    public init(seq: Seq, time: Timestamp) {
        self.seq = seq
        self.time = time
    }
    /// No message yet.
    public static let zero = Watermark(seq: .zero, time: .zero)
}
