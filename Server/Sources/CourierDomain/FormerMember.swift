// Courier — Apache-2.0
public import CourierWire

/// A leaver's frozen reading position in one membership.
public struct FormerMember: Sendable {
    public struct Ack: Sendable {
        public let seq: Seq
        public let time: Timestamp
        public init(seq: Seq, time: Timestamp) {
            self.seq = seq
            self.time = time
        }
    }
    public let account: AccountID
    public let readSeq: Seq
    public let readAt: Timestamp
    public let acks: [Ack]
    public init(account: AccountID, readSeq: Seq, readAt: Timestamp, acks: [Ack]) {
        self.account = account
        self.readSeq = readSeq
        self.readAt = readAt
        self.acks = acks
    }

    /// When it read `seq`, or `nil` if it had not.
    public func read(_ seq: Seq) -> Timestamp? {
        if seq <= readSeq { return readAt }
        return acks.first { $0.seq == seq }?.time
    }

    public static func encode(_ acks: [Ack]) -> String {
        "[" + acks.map { "[\($0.seq.rawValue),\($0.time.rawValue)]" }.joined(separator: ",") + "]"
    }

    public static func decode(_ text: String) -> [Ack] {
        let numbers = text.split { !"0123456789-".contains($0) }.compactMap { Int64($0) }
        return stride(from: 0, to: numbers.count - 1, by: 2).map {
            Ack(seq: Seq(numbers[$0]), time: Timestamp(milliseconds: numbers[$0 + 1]))
        }
    }
}
