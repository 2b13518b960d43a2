// Courier — Apache-2.0
public import CourierWire

/// A message's audience and readers (its `receipt_count` row).
public struct ReceiptTally: Hashable, Sendable, Codable {
    public let messageID: MessageID
    public let sender: AccountID
    public let audience: Int
    public let readCount: Int
    public var unreadCount: Int { max(0, audience - readCount) }
    public init(messageID: MessageID, sender: AccountID, audience: Int, readCount: Int) {
        self.messageID = messageID
        self.sender = sender
        self.audience = audience
        self.readCount = readCount
    }
}

/// A message newly read by one reader, with its tally after the read (what the sender's devices are told).
public struct ReceiptUpdate: Hashable, Sendable, Codable {
    public let seq: Seq
    public let tally: ReceiptTally
    public init(seq: Seq, tally: ReceiptTally) {
        self.seq = seq
        self.tally = tally
    }
}

/// A receipt list query, resolved by the server (the message is in the group and asked for receipts).
public struct ReceiptListQuery: Hashable, Sendable {
    public let group: ConversationID
    public let seq: Seq
    public let sender: AccountID
    public let list: ReceiptListKind
    /// Only these accounts (sorted, distinct).
    public let accounts: [AccountID]?
    public private(set) var cursor: ReceiptCursor?
    public let limit: Int
    public init(
        group: ConversationID,
        seq: Seq,
        sender: AccountID,
        list: ReceiptListKind,
        accounts: [AccountID]?,
        cursor: ReceiptCursor?,
        limit: Int
    ) {
        self.group = group
        self.seq = seq
        self.sender = sender
        self.list = list
        self.accounts = accounts.map { Array(Set($0)).sorted() }
        self.cursor = cursor
        self.limit = limit
    }

    /// The same query, continuing after `cursor`.
    public func with(cursor: ReceiptCursor) -> ReceiptListQuery {
        var query = self
        query.cursor = cursor
        return query
    }

    /// The parts of the list, in the order they are paged: the accounts asked for; or, for the read list, those who
    /// read it one by one, then by their position, then former members; otherwise the members by their position.
    var segments: [ReceiptCursor.Segment] {
        accounts != nil ? [.filtered] : list == .read ? [.acks, .watermarks, .former] : [.watermarks]
    }
}

/// One page of a receipt list.
public struct ReceiptPage: Hashable, Sendable {
    public let entries: [ReceiptListEntry]
    public let total: Int
    public let next: ReceiptCursor?
    public init(entries: [ReceiptListEntry], total: Int, next: ReceiptCursor?) {
        self.entries = entries
        self.total = total
        self.next = next
    }
}

/// Where a receipt list page ends. Lists are read in segments, each in its own index order: one-by-one acks (by
/// account), watermark positions (by `(seq, account)`), former members (by account); a filtered list is by account.
/// On the wire it is opaque text: `SEGMENT.SEQ.ACCOUNT`.
public struct ReceiptCursor: Hashable, Sendable {
    public enum Segment: String, Hashable, Sendable {
        case acks = "a"
        case watermarks = "w"
        case former = "f"
        case filtered = "x"
    }
    public let segment: Segment
    public let seq: Seq
    public let account: AccountID
    public init(segment: Segment, seq: Seq, account: AccountID) {
        self.segment = segment
        self.seq = seq
        self.account = account
    }

    /// The cursor as a client holds it, bound to the list it pages: `LIST.MESSAGE_SEQ.SEGMENT.SEQ.ACCOUNT`, e.g.
    /// `r.42.w.57.bob` (the read list of the message at seq 42, after bob's watermark at 57).
    public func text(for query: ReceiptListQuery) -> String {
        "\(Self.listKey(query.list)).\(query.seq.rawValue).\(segment.rawValue).\(seq.rawValue).\(account.rawValue)"
    }

    /// Reads a cursor given back by a client for `query` (whose own `cursor` is ignored); `nil` when it is not one
    /// this list handed out: another message's, another list's, a filtered list's for an unfiltered one or the
    /// other way round, or made up. Such a cursor is refused rather than silently restarting the list.
    public init?(text: String, for query: ReceiptListQuery) {
        let parts = text.split(separator: ".", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == Self.listKey(query.list), Int64(parts[1]) == query.seq.rawValue,
            let segment = Segment(rawValue: String(parts[2])), let seq = Int64(parts[3]), seq >= 0
        else { return nil }
        guard query.segments.contains(segment) else { return nil }
        let account = AccountID(rawValue: String(parts[4]))
        guard account.isValid else { return nil }
        self.init(segment: segment, seq: Seq(seq), account: account)
    }

    private static func listKey(_ list: ReceiptListKind) -> Substring {
        switch list {
        case .read: "r"
        case .unread: "u"
        default: "d"
        }
    }
}
