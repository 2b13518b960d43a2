// Courier — Apache-2.0
public import CourierWire

/// A read receipt with its messages resolved to seqs (the server validated ids and conversation before).
public struct ResolvedRead: Hashable, Sendable {
    public enum Target: Hashable, Sendable {
        /// These messages of others (own messages are never unread and are left out by the caller).
        case seqs([Seq])
        case upTo(Seq)
        case upToTime(Timestamp)
        case all
    }
    public let reader: AccountID
    public let conversation: ConversationID
    public let target: Target
    /// Whether peers learn of it.
    public let isShared: Bool
    /// When it was read (server time): group read lists report it.
    public let time: Timestamp
    /// Groups: the note left with a message read ack (the request's `content`; kept for the messages it names that
    /// asked for receipts).
    public let note: String?
    /// Whether it is told beyond the store (webhooks, other nodes): not for an imported read (docs/import.md).
    public var isAnnounced = true
    public init(
        reader: AccountID,
        conversation: ConversationID,
        target: Target,
        isShared: Bool,
        time: Timestamp,
        note: String? = nil
    ) {
        self.reader = reader
        self.conversation = conversation
        self.target = target
        self.isShared = isShared
        self.time = time
        self.note = note
    }
}

extension ResolvedRead.Target {
    /// The kind of read, as the reader's other devices are told.
    public var cause: ReadCause {
        switch self {
        case .seqs: .message
        case .upTo, .all: .conversation
        case .upToTime: .time
        }
    }
}

/// The outcome of ``ReadStore/markRead(_:)``: the reader's state the requester is answered with and the change the
/// read made (ADR 0057).
public struct ReadOutcome: Hashable, Sendable {
    /// The reader's own state after the read.
    public let own: ReadState
    /// Whether the reader's own position moved.
    public let ownChanged: Bool
    /// The reader's shared receipts, when they changed (what the other members are told).
    public let shared: MemberReceipts?
    /// Groups: the messages asking for receipts that this read newly covers, with their tallies after it.
    public let receipts: [ReceiptUpdate]
    /// What the read changed, built in the transaction that wrote it (``recorded(for:)``); none when it moved nothing
    /// or is told to nobody.
    public private(set) var change: Change?
    public init(own: ReadState, ownChanged: Bool, shared: MemberReceipts?, receipts: [ReceiptUpdate] = []) {
        self.own = own
        self.ownChanged = ownChanged
        self.shared = shared
        self.receipts = receipts
    }

    /// The same change with the group receipts it caused.
    public func with(receipts: [ReceiptUpdate]) -> ReadOutcome {
        ReadOutcome(own: own, ownChanged: ownChanged, shared: shared, receipts: receipts)
    }

    /// The outcome with the change `read` made (``Change/read(_:_:)``), built once, in the transaction that wrote.
    public func recorded(for read: ResolvedRead) -> ReadOutcome {
        var outcome = self
        outcome.change = Change.read(read, self)
        return outcome
    }
}
