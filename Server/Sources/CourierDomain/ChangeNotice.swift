// Courier — Apache-2.0
public import CourierWire

/// A committed ``Change`` as the other server nodes learn of it (PostgreSQL `NOTIFY`): the change itself when it fits
/// a notification (8,000 bytes), or a reference to what the receiver reads (``ChangeNotice/Content``). The receiver
/// turns it back into the change and derives the events with the functions the committing node used.
public struct ChangeNotice: Hashable, Sendable, Codable {
    public enum Content: Hashable, Sendable, Codable {
        /// The change, whole.
        case change(Change)
        /// An appended entry too large to carry: the receiver reads it by seq.
        case entry(ConversationID, seq: Seq, membershipSeq: Seq?)
        /// A read too large to carry (many read acks, many newly counted messages): the receiver reads what it
        /// names.
        case read(ReadReference)
        /// `account`'s view of a conversation changed: the receiver reads it (the notice is written before the view
        /// is read back, in the same transaction).
        case view(ConversationID, account: AccountID)
        /// A typing indicator: not a change, never stored (ADR 0050). Each node tells its own devices of the members;
        /// in a group at membership `version` (its member list, cached by version).
        case typing(TypingEvent, membershipVersion: Seq?)
        /// `account`'s profile changed: the receiver reads it (ADR 0053).
        case profile(AccountID)
    }

    /// A read as a notice names it: the receiver reads the reader's own state when `ownMoved`, its shared receipts
    /// when `sharedMoved` (a direct conversation), and the counts of `seqs` (at most 200 per notice).
    public struct ReadReference: Hashable, Sendable, Codable {
        public let conversation: ConversationID
        public let reader: AccountID
        public let time: Timestamp
        public let cause: ReadCause
        public let ownMoved: Bool
        public let sharedMoved: Bool
        public let seqs: [Seq]
        /// The note and the messages among `seqs` it goes with (``Change/Read/note``).
        public let note: String?
        public let noted: [Seq]
    }

    public let content: Content
    /// The node that committed it.
    public let origin: String
    /// When the committing node queued the notification, in microseconds since 1970 on that node's clock (set by the
    /// store as it notifies): a receiving node's change-feed lag is its own clock minus this, clock skew between the
    /// nodes included.
    public var publishedAt: Int64?

    public init(_ content: Content, origin: String) {
        self.content = content
        self.origin = origin
    }

    public init(_ change: Change, origin: String) { self.init(.change(change), origin: origin) }

    /// The conversation it concerns; `nil` for a change to an account.
    public var conversation: ConversationID? {
        switch content {
        case .change(let change): change.conversation
        case .entry(let conversation, _, _), .view(let conversation, _): conversation
        case .read(let read): read.conversation
        case .typing(let event, _): event.conversation
        case .profile: nil
        }
    }

    /// What always fits a notification, in notices of their own: an entry by its seq; a read by its reader, with the
    /// messages it counted 200 per notice.
    public var compact: [ChangeNotice] {
        let contents: [Content]
        switch content {
        case .change(.appended(let entry, let membershipSeq, _)):
            contents = [.entry(entry.conversation, seq: entry.seq, membershipSeq: membershipSeq)]
        case .change(.read(let read)):
            let seqs = read.receipts.map(\.seq)
            let noted = Set(read.noted)
            contents = stride(from: 0, to: max(seqs.count, 1), by: 200).map { start in
                let chunk = Array(seqs[min(start, seqs.count)..<min(start + 200, seqs.count)])
                let withNote = chunk.filter { noted.contains($0) }
                return .read(
                    ReadReference(
                        conversation: read.conversation, reader: read.reader, time: read.time, cause: read.cause,
                        ownMoved: start == 0 && read.own != nil, sharedMoved: start == 0 && read.shared != nil,
                        seqs: chunk, note: withNote.isEmpty ? nil : read.note, noted: withNote
                    )
                )
            }
        case .change(.viewChanged(let conversation, let account, _)):
            contents = [.view(conversation, account: account)]
        case .change(.profileChanged(let profile)):
            contents = [.profile(profile.account)]
        default:
            contents = [content]
        }
        return contents.map {
            var notice = ChangeNotice($0, origin: origin)
            notice.publishedAt = publishedAt
            return notice
        }
    }
}
