// Courier — Apache-2.0
public import CourierWire

/// A committed change, as other server nodes learn of it. It only says *what* changed and up to where; receivers
/// read the current state from the store (notifications can be late, reordered or lost).
public struct StoreChange: Hashable, Sendable, Codable {
    public enum Kind: String, Hashable, Sendable, Codable {
        /// A message was appended at `seq`.
        case message
        /// `account`'s delivery watermark moved to `seq`.
        case delivered
        /// `account`'s shared read receipts changed (its watermark is at `seq`).
        case read
        /// `account`'s own reading position changed, by a read of kind `cause`.
        case readState
    }

    public let kind: Kind
    public let conversation: ConversationID
    public let seq: Seq
    public let account: AccountID?
    /// For `.readState`: which kind of read.
    public let cause: ReadCause?
    /// The node that committed it.
    public let origin: String
    /// For `.read` in a group: the messages asking for receipts whose read count this read changed.
    public let receipts: [Seq]?
    /// For `.read` in a group: when it was read.
    public let time: Timestamp?
    /// For `.read` in a group: the ack's short content, and the messages it goes with.
    public let content: String?
    public let acked: [Seq]?
    /// For `.message` in a group: the membership version the entry was appended under (its audience).
    public let membershipSeq: Seq?
    /// When the committing node queued the notification, in microseconds since 1970 on that node's clock (set by the
    /// store as it notifies): a receiving node's change-feed lag is its own clock minus this, clock skew between the
    /// nodes included. `nil` from a node older than this field.
    public var publishedAt: Int64?

    public init(
        kind: Kind,
        conversation: ConversationID,
        seq: Seq,
        account: AccountID? = nil,
        cause: ReadCause? = nil,
        origin: String,
        receipts: [Seq]? = nil,
        time: Timestamp? = nil,
        content: String? = nil,
        acked: [Seq]? = nil,
        membershipSeq: Seq? = nil
    ) {
        self.kind = kind
        self.conversation = conversation
        self.seq = seq
        self.account = account
        self.cause = cause
        self.origin = origin
        self.receipts = receipts
        self.time = time
        self.content = content
        self.acked = acked
        self.membershipSeq = membershipSeq
    }
}

/// Changes committed by other nodes sharing the same database (PostgreSQL LISTEN/NOTIFY). The embedded SQLite store
/// has no feed: one node is the only writer.
public protocol ChangeFeed: Sendable {
    /// Runs until cancelled, reconnecting as needed. Calls `onChange` for each change committed by another node, and
    /// `onResync` whenever changes may have been missed (after every (re)connection of the listener).
    func run(
        onChange: @escaping @Sendable (StoreChange) async -> Void,
        onResync: @escaping @Sendable () async -> Void
    ) async throws

    /// Whether the feed is listening now: while it is not, other nodes' changes reach this node's devices only when
    /// they sync (the node is not ready, `GET /health/ready`).
    var isListening: Bool { get }
}
