// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
public import CourierWire

/// A read, written once for every backend: a reader's positions in a conversation moved by one or more targets
/// (``ReaderBook``), its read acks rewritten, its kept unread count moved along (ADR 0042), and its state after the
/// read answered — every decision made from facts read in the transaction that writes them.
///
/// The reader's receipt row is read first, locked where the backend locks rows (PostgreSQL's `FOR UPDATE OF r`: its
/// reads are serialized across nodes until commit); in a group the caller already holds what a group read holds
/// there (`PostgresStore.markRecordingRead`). A reader without a row gets an empty one before it is locked, and a
/// read that moves nothing leaves none behind. Every refusal (no such conversation, not a member, a seq beyond the
/// newest entry) comes before the first write.
///
/// What the read newly covers in a group is counted by the caller (``CountReadsProcedure``; SQLite's own statements,
/// ADR 0020), which then records the change.
public struct MarkReadProcedure: SQLProcedure {
    public struct Output: Sendable {
        /// The reader's state after the read and what it changed (the group receipts not counted yet).
        public let outcome: ReadOutcome
        /// In a group whose shared position moved: what it newly covers (``ReaderBook/newlyShared(since:)``).
        public let newlyShared: (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq])?
    }

    /// The reader's receipt row and the facts read with it.
    struct Stored {
        var last: Seq
        var own, shared, delivered: Watermark
        var kept: KeptUnread?
        /// Whether the row is the version the statement's snapshot saw (on PostgreSQL, unless another read of this
        /// reader committed while this one waited for the lock): only then do `hasAcks` and the others hold.
        var fresh: Bool
        var hasAcks: Bool
        var hasDeletions: Bool
        var cleared: Seq
        /// The time of the entry the last target names (the newest one for `.all`), if there is one.
        var namedTime: (seq: Seq, time: Int64)?
    }

    enum Asked {
        case positions, head, create, acks, resolve(Int), probe(own: Bool), time(Seq), count(Count), advance, keep
        case dropAcks, insertAcks, dropRow
    }

    enum Count {
        /// `kept` moved over `(from, floor]` and `(to, last]`.
        case moving(KeptUnread, floor: Seq)
        /// `(floor, last]` afresh, kept.
        case fresh(floor: Seq)
        /// Less the reader's acks and deletions: not kept.
        case full

        var isMoving: Bool {
            if case .moving = self { true } else { false }
        }
    }

    let read: ResolvedRead
    var targets: [ResolvedRead.Target]
    private var asked: Asked?
    var stored: Stored?
    /// Whether this read made the reader's receipt row (and so takes it away if it moves nothing).
    private var created = false
    private var rowMade = false
    private var last: Seq?
    private var resolvedCount = 0
    var acks: [(seq: Seq, shared: Bool, time: Int64)]?
    private var book: ReaderBook?
    private var before: (own: ReadPosition, shared: ReadPosition)?
    private var moved = (own: false, shared: false)
    /// What each position's compaction probe found, once asked.
    private var probes: (own: [Seq]?, shared: [Seq]?) = (nil, nil)
    private var compacted = false
    private var times: [Seq: Int64] = [:]
    var unread: (count: Int, kept: KeptUnread?)?
    /// The count the row's update makes and returns, when it makes one.
    var countedByAdvance: Count?
    /// Moving the kept count failed (a recall arrived, or it would fall below zero): counted afresh.
    private var keptFailed = false
    private var writes: [Asked]?

    /// - Parameter reads: Reads of one reader in one conversation and of one kind, applied in order as the first one
    ///   (its time and sharing).
    public init(_ reads: [ResolvedRead]) {
        read = reads[0]
        targets = reads.map(\.target)
    }

    var conversation: String { read.conversation.rawValue }
    var reader: String { read.reader.rawValue }
    var isGroup: Bool { read.conversation.kind == .group }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Output> {
        if let rows, let asked { try take(rows, for: asked) }
        let next = try self.next()
        asked = next.asked
        return next.step
    }

    // MARK: What each statement told

    private mutating func take(_ rows: [SQLRow], for asked: Asked) throws(StorageError) {
        switch asked {
        case .positions:
            guard let row = rows.first else {
                // No receipt row (the reader's first read here), or no such conversation: asked from the head.
                guard !rowMade else { throw .failed("The receipt row just made for \(reader) is not there.") }
                return
            }
            stored = try Self.stored(row)
            if isGroup, !(try row.bool(15)) { throw .groupRefused(.actorNotAMember) }
            if last == nil { last = stored?.last }
        case .head:
            guard let row = rows.first else { throw .conversationNotFound(read.conversation) }
            if isGroup, !(try row.bool(1)) { throw .groupRefused(.actorNotAMember) }
            last = Seq(try row.int64(0))
        case .create:
            created = !rows.isEmpty
            rowMade = true
        case .acks:
            acks = try rows.map { row throws(StorageError) in (Seq(try row.int64(0)), try row.bool(1), try row.int64(2)) }
        case .resolve(let index):
            targets[index] = .upTo(Seq(try rows.first?.int64(0) ?? 0))
        case .probe(let own):
            let seqs = try rows.map { row throws(StorageError) in Seq(try row.int64(0)) }
            if own { probes.own = seqs } else { probes.shared = seqs }
        case .time(let seq):
            times[seq] = try rows.first?.int64(0) ?? 0
        case .count(let count):
            guard let row = rows.first else { throw .failed("A count returned no row.") }
            switch count {
            case .moving(let kept, let floor):
                let last = stored?.last ?? .zero
                if let moved = kept.moved(
                    to: floor, last: last, read: try row.int(0), arrived: try row.int(1), recalls: try row.bool(2)
                ) {
                    unread = (moved.count, moved)
                } else {
                    keptFailed = true
                }
            case .fresh(let floor):
                let count = try row.int(0)
                unread = (count, KeptUnread(from: floor, to: stored?.last ?? .zero, count: count))
            case .full:
                unread = (try row.int(0), nil)
            }
        case .advance:
            guard let count = countedByAdvance else { return }
            guard let counted = try rows.first?.int(0) else { throw .failed("A read's update returned no count.") }
            if case .fresh(let floor) = count {
                unread = (counted, KeptUnread(from: floor, to: stored?.last ?? .zero, count: counted))
            } else {
                unread = (counted, nil)
            }
        case .keep, .dropAcks, .insertAcks, .dropRow:
            break
        }
    }

    private static func stored(_ row: SQLRow) throws(StorageError) -> Stored {
        func watermark(_ column: Int) throws(StorageError) -> Watermark {
            Watermark(seq: Seq(try row.int64(column)), time: Timestamp(milliseconds: try row.int64(column + 1)))
        }
        var kept: KeptUnread?
        if let from = try row.optionalInt64(7), let to = try row.optionalInt64(8), let count = try row.optionalInt(9) {
            kept = KeptUnread(from: Seq(from), to: Seq(to), count: count)
        }
        var namedTime: (seq: Seq, time: Int64)?
        if let time = try row.optionalInt64(14) { namedTime = (Seq(try row.int64(16)), time) }
        return Stored(
            last: Seq(try row.int64(0)),
            own: try watermark(1),
            shared: try watermark(3),
            delivered: try watermark(5),
            kept: kept,
            fresh: try row.bool(10),
            hasAcks: try row.bool(11),
            hasDeletions: try row.bool(12),
            cleared: Seq(try row.int64(13)),
            namedTime: namedTime
        )
    }

    // MARK: What to ask next

    private mutating func next() throws(StorageError) -> (asked: Asked?, step: SQLStep<Output>) {
        // The reader's row, locked; without one, the conversation's head and the reader's membership, the targets
        // checked against the head (every refusal before the first write), and an empty row made and locked.
        guard let stored else {
            guard asked != nil else { return ask(.positions, positionsQuery) }
            guard last != nil else { return ask(.head, headQuery) }
            if let resolving = try resolveNext() { return resolving }
            if case .create = asked { return ask(.positions, positionsQuery) }
            return ask(.create, createQuery)
        }
        if let resolving = try resolveNext() { return resolving }
        if acks == nil {
            guard !stored.hasAcks && stored.fresh else {
                return ask(.acks, acksQuery)
            }
            acks = []
        }
        if book == nil { applyTargets(stored) }
        guard var book, let before else { throw .failed("A read's positions were not loaded.") }
        if !compacted {
            // The first seqs of each probe's range that count as unread for the reader, asked before either
            // position is compacted.
            let wanted = book.compactionProbes
            if let probe = wanted.own, probes.own == nil { return ask(.probe(own: true), probeQuery(probe, view: true)) }
            if let probe = wanted.shared, probes.shared == nil {
                return ask(.probe(own: false), probeQuery(probe, view: false))
            }
            book.compact(own: probes.own, shared: probes.shared)
            // A fold alone moves a position too (what counts as unread can shrink after acks were stored: a recall,
            // a delete for me): it is written and announced like any move.
            moved = (moved.own || book.own != before.own, moved.shared || book.shared != before.shared)
            compacted = true
            self.book = book
        }
        // The times of the watermarks that moved: what the read answers with and writes.
        for seq in [book.own.watermark, book.shared.watermark]
        where seq != stored.own.seq && seq != stored.shared.seq && times[seq] == nil {
            if let named = stored.namedTime, named.seq == seq {
                times[seq] = named.time
            } else {
                return ask(.time(seq), timeQuery(seq))
            }
        }
        if unread == nil, countedByAdvance == nil {
            guard !book.readsEverything(upTo: stored.last) else {
                unread = (0, nil)
                return try next()
            }
            let count = countPlan(book, stored)
            // A read that moves a position counts in the statement that moves it (one round trip on PostgreSQL),
            // unless the kept count is moved: that decides between two counts.
            if moved.own || moved.shared, !count.isMoving {
                countedByAdvance = count
            } else {
                return ask(.count(count), countQuery(count, book, stored))
            }
        }
        if writes == nil { writes = plannedWrites(stored) }
        if let write = writes?.first {
            writes?.removeFirst()
            return ask(write, writeQuery(write, book, stored))
        }
        return (nil, .done(output(book, stored, before: before.shared)))
    }

    private func ask(_ asked: Asked, _ query: SQLQuery) -> (asked: Asked?, step: SQLStep<Output>) {
        (asked, .run(query))
    }

    /// The next target to resolve: a time needs a lookup; a seq is checked against the newest entry.
    private mutating func resolveNext() throws(StorageError) -> (asked: Asked?, step: SQLStep<Output>)? {
        guard let last else { return nil }
        while resolvedCount < targets.count {
            let index = resolvedCount
            switch targets[index] {
            case .seqs:
                resolvedCount += 1
            case .all:
                targets[index] = .upTo(last)
                resolvedCount += 1
            case .upTo(let seq):
                guard seq <= last else { throw .seqBeyondLastMessage(last: last) }
                resolvedCount += 1
            case .upToTime(let time):
                resolvedCount += 1
                // Time never decreases along seq, so the entries at or before `time` are a prefix of the log.
                return ask(
                    .resolve(index),
                    """
                    SELECT seq FROM message WHERE conversation_id = \(conversation) AND time <= \(time.rawValue)
                    ORDER BY seq DESC LIMIT 1
                    """
                )
            }
        }
        return nil
    }

    private mutating func applyTargets(_ stored: Stored) {
        let acks = self.acks ?? []
        var book = ReaderBook(
            ownWatermark: stored.own.seq,
            sharedWatermark: stored.shared.seq,
            acks: acks.map { ($0.seq, $0.shared) }
        )
        before = (book.own, book.shared)
        for target in targets {
            let step = book.apply(target, isShared: read.isShared)
            moved = (moved.own || step.own, moved.shared || step.shared)
        }
        self.book = book
    }

    /// How the unread count is had: a reader with neither acks nor deletions has its count kept (ADR 0042), moved
    /// along over the seqs it read and the entries that arrived since when that reads fewer entries, else counted
    /// afresh over `(position, last]`; any other is counted in full, and its kept count left as it is.
    private func countPlan(_ book: ReaderBook, _ stored: Stored) -> Count {
        guard book.own.readSeqs.isEmpty, !stored.hasDeletions else { return .full }
        let floor = max(book.own.watermark, stored.cleared)
        if !keptFailed, let kept = stored.kept, kept.moves(to: floor, last: stored.last) {
            return .moving(kept, floor: floor)
        }
        return .fresh(floor: floor)
    }

    private func plannedWrites(_ stored: Stored) -> [Asked] {
        guard moved.own || moved.shared else {
            if created { return [.dropRow] }
            if let kept = unread?.kept, kept != stored.kept { return [.keep] }
            return []
        }
        var writes: [Asked] = [.advance]
        if !(acks ?? []).isEmpty { writes.append(.dropAcks) }
        if !(book?.readAcks ?? []).isEmpty { writes.append(.insertAcks) }
        return writes
    }

    private func output(_ book: ReaderBook, _ stored: Stored, before: ReadPosition) -> Output {
        let outcome = book.change(
            in: read.conversation,
            reader: read.reader,
            moved: moved,
            ownTime: Timestamp(milliseconds: time(of: book.own.watermark, stored)),
            sharedTime: Timestamp(milliseconds: time(of: book.shared.watermark, stored)),
            delivered: stored.delivered,
            unreadCount: unread?.count ?? 0
        )
        let newly = isGroup && moved.shared ? book.newlyShared(since: before) : nil
        return Output(outcome: outcome, newlyShared: newly)
    }

    /// The time of the entry at a watermark: kept with the stored position, or looked up.
    func time(of seq: Seq, _ stored: Stored) -> Int64 {
        if seq == stored.own.seq { return stored.own.time.rawValue }
        if seq == stored.shared.seq { return stored.shared.time.rawValue }
        return times[seq] ?? 0
    }
}
