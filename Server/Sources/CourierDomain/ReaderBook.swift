// Courier — Apache-2.0
public import CourierWire

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

    /// These messages are read, exactly these (a message read ack: SPEC section 4, ADR 0038): whichever of them is
    /// the conversation's newest, nothing else is. Returns whether the position moved.
    @discardableResult
    public mutating func read(_ seqs: [Seq]) -> Bool {
        let new = Set(seqs).subtracting(readSeqs).filter { $0 > watermark }
        guard !new.isEmpty else { return false }
        readSeqs = (readSeqs + new).sorted()
        return true
    }

    /// What ``compact(countable:)`` needs to know: the seqs above the watermark up to the highest one read one by one
    /// that count as unread for the reader (others' messages that count), the first `limit` of them in seq order.
    /// One more than the reads above the watermark: among that many, one is unread, unless there are fewer.
    public var compactionProbe: (range: ClosedRange<Seq>, limit: Int)? {
        guard let highest = readSeqs.last else { return nil }
        return (watermark.next...highest, readSeqs.count + 1)
    }

    /// Moves the watermark to the highest read seq below the first message still unread, so that reading one by one
    /// in order leaves no rows behind: what lies between (the reader's own messages, entries that never count as
    /// unread) needs no read. Nothing unread is ever covered.
    ///
    /// - Parameter countable: What the stores found for ``compactionProbe``, ascending.
    public mutating func compact(countable: [Seq]) {
        let read = Set(readSeqs)
        let firstUnread = countable.first { !read.contains($0) }
        let fold = readSeqs.last { seq in firstUnread.map { seq < $0 } ?? true }
        if let fold { self.read(upTo: fold) }
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
    public mutating func apply(_ target: ResolvedRead.Target, isShared: Bool) -> (own: Bool, shared: Bool) {
        func apply(to position: inout ReadPosition) -> Bool {
            switch target {
            case .seqs(let seqs): position.read(seqs)
            case .upTo(let seq): position.read(upTo: seq)
            case .upToTime, .all: preconditionFailure("resolve the target to seqs first")
            }
        }
        let ownMoved = apply(to: &own)
        let sharedMoved = isShared ? apply(to: &shared) : false
        return (ownMoved, sharedMoved)
    }

    /// What each position's compaction needs to know (``ReadPosition/compactionProbe``). The own position steps over
    /// what the reader deleted or cleared for itself too; the shared one does not — what peers see never tells them
    /// of an account's own view (ADR 0029).
    public var compactionProbes: (own: (range: ClosedRange<Seq>, limit: Int)?, shared: (range: ClosedRange<Seq>, limit: Int)?) {
        (own.compactionProbe, shared.compactionProbe)
    }

    /// Compacts both positions (``ReadPosition/compact(countable:)``) with what the stores found for each of
    /// ``compactionProbes`` (`nil` where there was no probe).
    public mutating func compact(own ownCountable: [Seq]?, shared sharedCountable: [Seq]?) {
        if let ownCountable { own.compact(countable: ownCountable) }
        if let sharedCountable { shared.compact(countable: sharedCountable) }
    }

    /// Whether nothing in a conversation whose newest entry is `last` is unread (no count needed).
    public func readsEverything(upTo last: Seq) -> Bool { own.watermark == last }

    /// The outcome of a read, from the positions in hand (nothing is read back from the database).
    ///
    /// - Parameters:
    ///   - moved: What ``apply(_:isShared:)`` reported.
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
    ) -> ReadOutcome {
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
        return ReadOutcome(own: own, ownChanged: moved.own, shared: shared)
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
