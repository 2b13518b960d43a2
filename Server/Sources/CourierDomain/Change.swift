// Courier — Apache-2.0
public import CourierWire

/// What one committed write changed (ADRs 0033, 0057): one value, built once in the writing transaction from what its
/// statements returned and returned by the write with its outcome (``AppendOutcome/change``,
/// ``DeliveryOutcome/change``, ``ReadOutcome/change``), from which every consumer derives what it needs with pure
/// functions written once: the webhook events it records (``webhookEvents``), the device events and
/// their audience (``events(of:)``), and what the other nodes are told (``ChangeNotice``). The receiving node turns a
/// notice back into the same value, reading only what the notice could not carry, and derives the same events.
public enum Change: Hashable, Sendable, Codable {
    /// An entry (a message, a recall notice, a group change, a late ask for receipts) was appended under the group's
    /// membership version `membershipSeq` (its audience; ADR 0023). `pushes`: a push is owed to whoever lacks it.
    case appended(WireMessage, membershipSeq: Seq?, pushes: Bool)
    /// `account`'s delivery watermark moved, at `time`.
    case delivered(ConversationID, account: AccountID, watermark: Watermark, at: Timestamp)
    /// A read moved its reader's own position, or what it shares, or both.
    case read(Read)
    /// `account`'s own view of a conversation changed (ADR 0029).
    case viewChanged(ConversationID, account: AccountID, view: ConversationView)
    /// `account` was deactivated or reactivated, or its tokens were revoked: every node closes its sessions (the
    /// receiver reads the account's status).
    case accountChanged(AccountID)
    /// The app's backend disconnected one device of `account` (`nil`: all of them). Nothing is stored: the device
    /// may connect again.
    case deviceKicked(AccountID, device: DeviceID?)
    /// An account's profile changed (ADR 0053): told to its devices and its contacts' (``Audience/contacts(of:)``),
    /// and reported by the `account.updated` webhook.
    case profileChanged(AccountProfile)
    /// A member added or removed a reaction (ADR 0055), at `time`, in a group under membership version
    /// `membershipVersion` (its audience): told to the members' devices with the message's counts, and reported by the
    /// `reaction.added` or `reaction.removed` webhook.
    case reacted(ReactionEvent, at: Timestamp, membershipVersion: Seq?)

    /// What a read changed.
    public struct Read: Hashable, Sendable, Codable {
        public let conversation: ConversationID
        public let reader: AccountID
        /// When it was read (server time).
        public let time: Timestamp
        /// The kind of read, as the reader's other devices are told.
        public let cause: ReadCause
        /// The reader's own state after the read, when its own position moved.
        public let own: ReadState?
        /// The reader's shared receipts after the read, when they moved (what the other members learn).
        public let shared: MemberReceipts?
        /// In a group, the messages asking for receipts that the read newly covers, with their counts after it.
        public let receipts: [ReceiptUpdate]
        /// The note left with the messages the read named that it counted (`noted`): kept for those only.
        public let note: String?
        public let noted: [Seq]

        public init(
            conversation: ConversationID,
            reader: AccountID,
            time: Timestamp,
            cause: ReadCause,
            own: ReadState?,
            shared: MemberReceipts?,
            receipts: [ReceiptUpdate] = [],
            note: String? = nil,
            noted: [Seq] = []
        ) {
            self.conversation = conversation
            self.reader = reader
            self.time = time
            self.cause = cause
            self.own = own
            self.shared = shared
            self.receipts = receipts
            self.note = note
            self.noted = noted
        }
    }

    /// The conversation it concerns; `nil` for a change to an account.
    public var conversation: ConversationID? {
        switch self {
        case .appended(let entry, _, _): entry.conversation
        case .delivered(let conversation, _, _, _), .viewChanged(let conversation, _, _): conversation
        case .read(let read): read.conversation
        case .reacted(let event, _, _): event.conversation
        case .accountChanged, .deviceKicked, .profileChanged: nil
        }
    }

    /// Whether another node may act on it: not a delivery in a group (a group's deliveries are asked for, not
    /// pushed), nor a group read that only moved what the reader shares without counting a message (a group's shared
    /// position is not pushed to its members).
    public var concernsOtherNodes: Bool {
        switch self {
        case .delivered(let conversation, _, _, _): conversation.kind == .direct
        case .read(let read): read.own != nil || !read.receipts.isEmpty || read.conversation.kind == .direct && read.shared != nil
        case .appended, .viewChanged, .accountChanged, .deviceKicked, .profileChanged, .reacted: true
        }
    }

    // MARK: Built in the transaction that wrote

    /// A read's change, when it moved anything; none for an imported read (told to nobody).
    public static func read(_ read: ResolvedRead, _ outcome: ReadOutcome) -> Change? {
        guard read.isAnnounced, outcome.ownChanged || outcome.shared != nil || !outcome.receipts.isEmpty else {
            return nil
        }
        var noted: [Seq] = []
        if read.note != nil, case .seqs(let seqs) = read.target {
            let named = Set(seqs)
            noted = outcome.receipts.map(\.seq).filter { named.contains($0) }
        }
        return .read(
            Read(
                conversation: read.conversation,
                reader: read.reader,
                time: read.time,
                cause: read.target.cause,
                own: outcome.ownChanged ? outcome.own : nil,
                shared: outcome.shared,
                receipts: outcome.receipts,
                note: noted.isEmpty ? nil : read.note,
                noted: noted
            )
        )
    }
}
