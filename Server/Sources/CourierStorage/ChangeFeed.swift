// Courier — Apache-2.0
public import CourierWire

/// A committed change, as the other server nodes learn of it (PostgreSQL `NOTIFY`): what the transaction changed,
/// carrying what another node needs to derive the events when it fits a notification (8,000 bytes), or where to read
/// it otherwise. Derived once from what the store's transaction returned (``appended(_:origin:)``,
/// ``delivered(_:in:_:origin:)``, ``read(_:_:origin:)``); the receiving node derives the events from it with the same
/// functions the committing node used.
public struct StoreChange: Hashable, Sendable, Codable {
    public enum What: Hashable, Sendable, Codable {
        /// An entry was appended, under the group's membership version `membershipSeq` (its audience; ADR 0023).
        case appended(WireMessage, membershipSeq: Seq?)
        /// An entry too large for a notification: the receiver reads it by seq.
        case appendedAt(ConversationID, seq: Seq, membershipSeq: Seq?)
        /// `account`'s delivery watermark moved in a direct conversation (group deliveries are queried, not pushed).
        case delivered(ConversationID, account: AccountID, watermark: Watermark)
        /// `account` shared a read in a direct conversation: its receipts now (`nil` when too many one-by-one reads to
        /// carry: the receiver reads them).
        case read(ConversationID, account: AccountID, shared: MemberReceipts?)
        /// A group read newly covered `seqs` (messages asking for receipts; their counts are read by the receiver),
        /// at `time`; `content` is the note left with the messages `acked`.
        case groupRead(ConversationID, reader: AccountID, seqs: [Seq], time: Timestamp, content: String?, acked: [Seq]?)
        /// `account`'s own reading position moved by a read of kind `cause` (the receiver reads it).
        case readState(ConversationID, account: AccountID, cause: ReadCause)
        /// `account` was deactivated or reactivated, or its tokens were revoked: every node closes its sessions
        /// (the receiver reads the account's status).
        case accountChanged(AccountID)
        /// The app's backend disconnected one device of `account` (`nil`: all of them): every node ends its sessions.
        /// Nothing is stored: the device may connect again.
        case deviceKicked(AccountID, device: DeviceID?)
        /// `account`'s view of a conversation changed (ADR 0029; the receiver reads it).
        case viewChanged(ConversationID, account: AccountID)
    }

    public let what: What
    /// The node that committed it.
    public let origin: String
    /// When the committing node queued the notification, in microseconds since 1970 on that node's clock (set by the
    /// store as it notifies): a receiving node's change-feed lag is its own clock minus this, clock skew between the
    /// nodes included.
    public var publishedAt: Int64?

    public init(_ what: What, origin: String) {
        self.what = what
        self.origin = origin
    }

    /// The conversation it concerns; `nil` for a change to an account.
    public var conversation: ConversationID? {
        switch what {
        case .accountChanged, .deviceKicked: nil
        case .appended(let entry, _): entry.conversation
        case .appendedAt(let conversation, _, _), .delivered(let conversation, _, _), .read(let conversation, _, _),
            .groupRead(let conversation, _, _, _, _, _), .readState(let conversation, _, _),
            .viewChanged(let conversation, _):
            conversation
        }
    }

    /// The same change with only what always fits a notification: an entry by its seq, a read without its receipts.
    public var compact: StoreChange {
        var compact = self
        switch what {
        case .appended(let entry, let membershipSeq):
            let what = What.appendedAt(entry.conversation, seq: entry.seq, membershipSeq: membershipSeq)
            compact = StoreChange(what, origin: origin)
        case .read(let conversation, let account, _?):
            compact = StoreChange(.read(conversation, account: account, shared: nil), origin: origin)
        default:
            break
        }
        compact.publishedAt = publishedAt
        return compact
    }

    // MARK: Derived from what a transaction returned

    /// A new entry's change; none for a duplicate or an entry announced to nobody (imported history).
    public static func appended(
        _ result: AppendResult,
        _ announcement: MessageDraft.Announcement = .everyone,
        origin: String
    ) -> [StoreChange] {
        guard !result.isDuplicate, announcement != .nobody else { return [] }
        return [StoreChange(.appended(result.message, membershipSeq: result.membershipSeq), origin: origin)]
    }

    /// A delivery's change, when its watermark moved in a direct conversation.
    public static func delivered(
        _ account: AccountID,
        in conversation: ConversationID,
        _ change: WatermarkChange,
        origin: String
    ) -> [StoreChange] {
        guard change.advanced, conversation.kind == .direct else { return [] }
        return [StoreChange(.delivered(conversation, account: account, watermark: change.watermark), origin: origin)]
    }

    /// A read's changes: the reader's own position, and what it shared (direct) or the messages whose counts it
    /// changed (group, 200 per notification).
    public static func read(_ mark: ResolvedRead, _ change: ReadChange, origin: String) -> [StoreChange] {
        guard mark.isAnnounced else { return [] }
        var changes: [StoreChange] = []
        if mark.conversation.kind == .group {
            var acked: Set<Seq> = []
            if case .seqs(let seqs) = mark.target { acked = Set(seqs) }
            for start in stride(from: 0, to: change.receipts.count, by: 200) {
                let seqs = change.receipts[start..<min(start + 200, change.receipts.count)].map(\.seq)
                let withContent = mark.content == nil ? [] : seqs.filter { acked.contains($0) }
                let what = What.groupRead(
                    mark.conversation,
                    reader: mark.reader,
                    seqs: seqs,
                    time: mark.time,
                    content: withContent.isEmpty ? nil : mark.content,
                    acked: withContent.isEmpty ? nil : withContent
                )
                changes.append(StoreChange(what, origin: origin))
            }
        } else if let shared = change.shared {
            changes.append(StoreChange(.read(mark.conversation, account: mark.reader, shared: shared), origin: origin))
        }
        if change.ownChanged {
            let what = What.readState(mark.conversation, account: mark.reader, cause: mark.target.cause)
            changes.append(StoreChange(what, origin: origin))
        }
        return changes
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
