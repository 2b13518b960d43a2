// Courier — Apache-2.0
public import CourierWire

/// Read receipts, unread counts and read privacy (SPEC §4, §7).
///
/// Per (conversation, reader) the store keeps two reading positions in the `receipt` row — the reader's own (every
/// read, private ones included: it drives the unread count) and the shared one (what peers see) — plus the few
/// messages above each watermark that were read one by one. A read costs O(1) rows; in-order reading adds none.
public protocol ReadStore: Sendable {
    /// Applies a read receipt in one transaction. Watermarks only move forward; a stale or repeated read changes
    /// nothing and returns the current state.
    ///
    /// - Throws: `.conversationNotFound`; `.seqBeyondLastMessage` for an `upTo` past the newest message.
    func markRead(_ mark: ResolvedRead) async throws(StorageError) -> ReadChange
    /// Applies several read receipts (each as ``markRead(_:)`` would) in one transaction: all of them or none.
    /// Returns one change per mark, in order.
    ///
    /// - Throws: as ``markRead(_:)``, for the first mark that fails; nothing is then written.
    func markReads(_ marks: [ResolvedRead]) async throws(StorageError) -> [ReadChange]
    /// The reader's own state in one conversation.
    func readState(of reader: AccountID, in conversation: ConversationID) async throws(StorageError) -> ReadState
    /// Unread counts of every conversation of `account` that has unread messages.
    func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int]
    /// The account's read-receipt settings (absent ones are `true`).
    func readReceiptSettings(of account: AccountID) async throws(StorageError) -> StoredReadReceiptSettings
    /// The read-receipt settings of several accounts as far as they concern `conversation` (their account-wide
    /// setting and the one for `conversation`); accounts with neither are left out (their settings are `true`).
    func readReceiptSettings(
        of accounts: [AccountID],
        in conversation: ConversationID
    ) async throws(StorageError) -> [AccountID: StoredReadReceiptSettings]
    /// Sets whether `account` shares reads, account-wide (`conversation == nil`) or in one conversation.
    func setSendReadReceipts(
        _ value: Bool,
        for account: AccountID,
        in conversation: ConversationID?
    ) async throws(StorageError)
}

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
    /// Groups: the short note sent with a message ack (kept for the acked messages that asked for receipts).
    public let content: String?
    /// Whether it is told beyond the store (webhooks, other nodes): not for an imported read (docs/import.md).
    public var isAnnounced = true
    public init(
        reader: AccountID,
        conversation: ConversationID,
        target: Target,
        isShared: Bool,
        time: Timestamp,
        content: String? = nil
    ) {
        self.reader = reader
        self.conversation = conversation
        self.target = target
        self.isShared = isShared
        self.time = time
        self.content = content
    }
}

/// The outcome of ``ReadStore/markRead(_:)``.
public struct ReadChange: Hashable, Sendable {
    /// The reader's own state after the read.
    public let own: ReadState
    /// Whether the reader's own position moved.
    public let ownChanged: Bool
    /// The reader's shared receipts, when they changed (what the other members are told).
    public let shared: MemberReceipts?
    /// Groups: the messages asking for receipts that this read newly covers, with their tallies after it.
    public let receipts: [GroupReceiptChange]
    public init(own: ReadState, ownChanged: Bool, shared: MemberReceipts?, receipts: [GroupReceiptChange] = []) {
        self.own = own
        self.ownChanged = ownChanged
        self.shared = shared
        self.receipts = receipts
    }

    /// The same change with the group receipts it caused.
    public func with(receipts: [GroupReceiptChange]) -> ReadChange {
        ReadChange(own: own, ownChanged: ownChanged, shared: shared, receipts: receipts)
    }
}

/// An account's stored read-receipt settings.
public struct StoredReadReceiptSettings: Hashable, Sendable {
    public let sendReadReceipts: Bool
    public let conversations: [ConversationID: Bool]
    public init(sendReadReceipts: Bool, conversations: [ConversationID: Bool]) {
        self.sendReadReceipts = sendReadReceipts
        self.conversations = conversations
    }

    /// Settings from `read_setting` rows (account, conversation id or `""` for account-wide, value).
    public static func grouped(
        _ rows: [(account: AccountID, conversation: String, value: Bool)]
    ) -> [AccountID: StoredReadReceiptSettings] {
        Dictionary(grouping: rows, by: \.account).mapValues { rows in
            var global = true
            var conversations: [ConversationID: Bool] = [:]
            for row in rows {
                if row.conversation.isEmpty {
                    global = row.value
                } else {
                    conversations[ConversationID(rawValue: row.conversation)] = row.value
                }
            }
            return StoredReadReceiptSettings(sendReadReceipts: global, conversations: conversations)
        }
    }
}

/// A reading position: everything up to `watermark` is read, plus `readSeqs` above it read one by one.
///
/// The one implementation of the read rules, shared by every backend (they load a position, apply, and write it
/// back in the same transaction).
public struct ReadPosition: Hashable, Sendable {
    public private(set) var watermark: Seq
    /// Ascending, all above `watermark`.
    public private(set) var readSeqs: [Seq]

    public init(watermark: Seq, readSeqs: some Sequence<Seq>) {
        self.watermark = watermark
        self.readSeqs = Set(readSeqs.filter { $0 > watermark }).sorted()
    }

    /// Everything up to `seq` is read. Returns whether the position moved.
    @discardableResult
    public mutating func read(upTo seq: Seq) -> Bool {
        guard seq > watermark else { return false }
        watermark = seq
        readSeqs.removeAll { $0 <= seq }
        return true
    }

    /// These messages are read; naming the conversation's newest message (`last`) reads everything. Returns
    /// whether the position moved.
    @discardableResult
    public mutating func read(_ seqs: [Seq], last: Seq) -> Bool {
        if seqs.contains(last) { return read(upTo: last) }
        let new = Set(seqs).subtracting(readSeqs).filter { $0 > watermark }
        guard !new.isEmpty else { return false }
        readSeqs = (readSeqs + new).sorted()
        return true
    }

    /// Folds read seqs that continue the watermark into it, stepping over the reader's own messages (`ownSeqs`,
    /// never unread), so that reading in order leaves no rows behind.
    public mutating func compact(skipping ownSeqs: Set<Seq>) {
        let acked = Set(readSeqs)
        var next = watermark.next
        var folded = watermark
        while true {
            if acked.contains(next) {
                folded = next
            } else if !ownSeqs.contains(next) {
                break
            }
            next = next.next
        }
        read(upTo: folded)
    }

    /// The range in which the reader's own messages matter to ``compact(skipping:)``, if any.
    public var compactionWindow: ClosedRange<Seq>? {
        guard let highest = readSeqs.last else { return nil }
        return watermark.next...highest
    }
}

/// One reader's two positions in a conversation, loaded for an update: its own, and the shared one (a subset).
public struct ReaderBook: Hashable, Sendable {
    public private(set) var own: ReadPosition
    public private(set) var shared: ReadPosition

    /// - Parameter acks: Every stored one-by-one read above the own watermark or shared, with its shared flag.
    public init(ownWatermark: Seq, sharedWatermark: Seq, acks: [(seq: Seq, shared: Bool)]) {
        own = ReadPosition(watermark: ownWatermark, readSeqs: acks.map(\.seq))
        shared = ReadPosition(watermark: sharedWatermark, readSeqs: acks.filter(\.shared).map(\.seq))
    }

    /// Applies a resolved read (`.seqs` or `.upTo`); returns which positions moved.
    public mutating func apply(
        _ target: ResolvedRead.Target,
        last: Seq,
        isShared: Bool
    ) -> (own: Bool, shared: Bool) {
        func apply(to position: inout ReadPosition) -> Bool {
            switch target {
            case .seqs(let seqs): position.read(seqs, last: last)
            case .upTo(let seq): position.read(upTo: seq)
            case .upToTime, .all: preconditionFailure("resolve the target to seqs first")
            }
        }
        let ownMoved = apply(to: &own)
        let sharedMoved = isShared ? apply(to: &shared) : false
        return (ownMoved, sharedMoved)
    }

    /// Where the reader's own messages are needed for compaction.
    public var compactionWindow: ClosedRange<Seq>? {
        switch (own.compactionWindow, shared.compactionWindow) {
        case (let a?, let b?): min(a.lowerBound, b.lowerBound)...max(a.upperBound, b.upperBound)
        case (let a?, nil): a
        case (nil, let b?): b
        case (nil, nil): nil
        }
    }

    public mutating func compact(skipping ownSeqs: Set<Seq>) {
        own.compact(skipping: ownSeqs)
        shared.compact(skipping: ownSeqs)
    }

    /// Whether nothing in a conversation whose newest entry is `last` is unread (no count needed).
    public func readsEverything(upTo last: Seq) -> Bool { own.watermark == last }

    /// The outcome of a read, from the positions in hand (nothing is read back from the database).
    ///
    /// - Parameters:
    ///   - moved: What ``apply(_:last:isShared:)`` reported.
    ///   - ownTime, sharedTime: The times of the messages at the two watermarks.
    ///   - delivered: The reader's delivery watermark before the read (a shared read raises it).
    ///   - unreadCount: The reader's unread count after the read.
    public func change(
        in conversation: ConversationID,
        reader: AccountID,
        moved: (own: Bool, shared: Bool),
        ownTime: Timestamp,
        sharedTime: Timestamp,
        delivered: Watermark,
        unreadCount: Int
    ) -> ReadChange {
        let own = ReadState(
            conversation: conversation,
            watermark: Watermark(seq: self.own.watermark, time: ownTime),
            readSeqs: self.own.readSeqs,
            unreadCount: unreadCount
        )
        var shared: MemberReceipts?
        if moved.shared {
            let read = Watermark(seq: self.shared.watermark, time: sharedTime)
            shared = MemberReceipts(
                account: reader,
                delivered: read.seq > delivered.seq ? read : delivered,
                read: read,
                readSeqs: self.shared.readSeqs
            )
        }
        return ReadChange(own: own, ownChanged: moved.own, shared: shared)
    }

    /// The messages the shared position newly covers compared to `before`: the seqs in the watermark's advance that
    /// were not acked one by one already, as a range and exclusions, and the new one-by-one acks above it.
    public func newlyShared(since before: ReadPosition) -> (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq]) {
        let range = shared.watermark > before.watermark ? before.watermark.next...shared.watermark : nil
        let excluding = range.map { range in before.readSeqs.filter { range.contains($0) } } ?? []
        let old = Set(before.readSeqs)
        return (range, excluding, shared.readSeqs.filter { !old.contains($0) })
    }

    /// The read acks to store (`read_ack` rows): every one-by-one read still above a watermark, and whether it is
    /// shared.
    public var readAcks: [(seq: Seq, shared: Bool)] {
        let shared = Set(self.shared.readSeqs)
        return Set(own.readSeqs).union(shared).sorted().map { ($0, shared.contains($0)) }
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
