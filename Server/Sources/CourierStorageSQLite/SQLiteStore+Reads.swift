// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
public import CourierWire
internal import GRDB

extension SQLiteStore: ReadStore {
    public func markRead(
        _ read: ResolvedRead,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> ReadOutcome {
        guard let key = PendingReads.key(of: read) else {
            return try await write(queued: whenQueued) { db in try Self.markRecordingRead(db, read) }
        }
        let (entry, leads) = pendingReads.enter(read, key: key)
        guard leads else {
            // Its place: in the waiting write it joined, after the reads before it.
            whenQueued?()
            // Joined a read waiting for the writer: answered from its commit, with the reader's state after it.
            switch await entry.outcome() {
            case .written(let change): return ReadOutcome(own: change.own, ownChanged: false, shared: nil)
            case .writeAlone: return try await write { db in try Self.markRecordingRead(db, read) }
            }
        }
        do {
            let reads = pendingReads
            let change = try await write(queued: whenQueued) { db in
                try Self.markRecordingRead(db, reads.take(entry, key: key))
            }
            entry.finish(.written(change))
            return change
        } catch {
            // Written one by one instead, the leader's first: what fails, fails alone.
            guard pendingReads.take(entry, key: key).count > 1 else {
                entry.finish(.writeAlone)
                throw error
            }
            return try await write(queued: { entry.finish(.writeAlone) }) { db in try Self.markRecordingRead(db, read) }
        }
    }

    public func markReads(_ reads: [ResolvedRead]) async throws(StorageError) -> [ReadOutcome] {
        // One savepoint for the whole batch: all of the reads, or none.
        try await write { db in try reads.map { try Self.markRecordingRead(db, $0) } }
    }

    /// A read and its webhook event, in the caller's transaction.
    static func markRecordingRead(_ db: Database, _ read: ResolvedRead) throws -> ReadOutcome {
        try markRecordingRead(db, [read])
    }

    /// Reads of one reader in one conversation and of one kind (``PendingReads``), applied in order as the first one
    /// (its time, its cause: what it publishes too): one write, one change and its webhook event.
    static func markRecordingRead(_ db: Database, _ reads: [ResolvedRead]) throws -> ReadOutcome {
        let outcome = try markRead(db, reads[0], then: reads.dropFirst().map(\.target)).recorded(for: reads[0])
        try announce(db, outcome.change)
        return outcome
    }

    static func markRead(_ db: Database, _ read: ResolvedRead, then more: [ResolvedRead.Target] = []) throws -> ReadOutcome {
        let conversation = read.conversation.rawValue
        let reader = read.reader.rawValue
        guard
            let (last, isGroup) = try Row.first(
                db.cachedStatement(sql: "SELECT last_seq, kind = ? FROM conversation WHERE id = ?"),
                arguments: [ConversationKind.group.rawValue, conversation],
                { (Seq($0[0] as Int64), $0[1] as Bool) }
            )
        else { throw StorageError.conversationNotFound(read.conversation) }
        if isGroup, try Self.memberRow(db, read.reader, of: read.conversation) == nil {
            throw StorageError.groupRefused(.actorNotAMember)
        }
        let targets = try ([read.target] + more).map { try Self.resolve(db, $0, in: read.conversation, last: last) }
        let positions = try Row.first(
            db.cachedStatement(
                sql: """
                    SELECT own_read_seq, own_read_time, read_seq, read_time, delivered_seq, delivered_time,
                        unread_from, unread_to, unread_count
                    FROM receipt WHERE conversation_id = ? AND account = ?
                    """
            ),
            arguments: [conversation, reader]
        ) { row in
            (
                watermarks: (0..<3).map {
                    Watermark(seq: Seq(row[$0 * 2] as Int64), time: Timestamp(milliseconds: row[$0 * 2 + 1]))
                },
                kept: KeptUnread(row, from: 6)
            )
        }
        let readAcks = try Row.all(
            db.cachedStatement(
                sql: "SELECT seq, shared, time FROM read_ack WHERE conversation_id = ? AND account = ?"
            ),
            arguments: [conversation, reader]
        ) { (seq: Seq($0[0] as Int64), shared: $0[1] as Bool, time: $0[2] as Int64) }
        let acks = readAcks.map { (seq: $0.seq, shared: $0.shared) }
        // An ack keeps the time it was first made.
        let ackTimes = [Seq: Int64](uniqueKeysWithValues: readAcks.map { ($0.seq, $0.time) })
        let none = Watermark(seq: .zero, time: .zero)
        let (storedOwn, storedShared, storedDelivered) = (
            positions?.watermarks[0] ?? none, positions?.watermarks[1] ?? none, positions?.watermarks[2] ?? none
        )
        var book = ReaderBook(ownWatermark: storedOwn.seq, sharedWatermark: storedShared.seq, acks: acks)
        let (ownBefore, sharedBefore) = (book.own, book.shared)
        var moved = (own: false, shared: false)
        for target in targets {
            let step = book.apply(target, isShared: read.isShared)
            moved = (moved.own || step.own, moved.shared || step.shared)
        }
        let probes = book.compactionProbes
        book.compact(
            own: try probes.own.map { try Self.countableSeqs(db, of: reader, in: conversation, $0.range, limit: $0.limit, view: true) },
            shared: try probes.shared.map { try Self.countableSeqs(db, of: reader, in: conversation, $0.range, limit: $0.limit, view: false) }
        )
        // A fold alone moves a position too (what counts as unread can shrink after acks were stored: a recall, a
        // delete for me): it is written and announced like any move.
        moved = (moved.own || book.own != ownBefore, moved.shared || book.shared != sharedBefore)
        // The answer is computed from the positions in hand; only what moved is looked up or written.
        let ownTime =
            book.own.watermark == storedOwn.seq
            ? storedOwn.time.rawValue : try Self.time(db, of: book.own.watermark, in: conversation)
        let sharedTime =
            book.shared.watermark == storedShared.seq
            ? storedShared.time.rawValue
            : book.shared.watermark == book.own.watermark
                ? ownTime : try Self.time(db, of: book.shared.watermark, in: conversation)
        if moved.own || moved.shared {
            // Read implies delivered: a shared read also moves the delivery watermark. Every column only moves
            // forward, whatever is already stored.
            try db.cachedStatement(
                sql: """
                    INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time,
                        read_seq, read_time, own_read_seq, own_read_time, read_at, delivered_at, stamp)
                    VALUES (?1, ?2, ?3, ?4, ?3, ?4, ?5, ?6, ?7, ?7, change_stamp())
                    ON CONFLICT (conversation_id, account) DO UPDATE SET
                        stamp = excluded.stamp,
                        delivered_time = CASE WHEN excluded.delivered_seq > delivered_seq
                            THEN excluded.delivered_time ELSE delivered_time END,
                        delivered_at = CASE WHEN excluded.delivered_seq > delivered_seq
                            THEN excluded.delivered_at ELSE delivered_at END,
                        delivered_seq = max(delivered_seq, excluded.delivered_seq),
                        read_time = CASE WHEN excluded.read_seq > read_seq THEN excluded.read_time ELSE read_time END,
                        read_at = CASE WHEN excluded.read_seq > read_seq THEN excluded.read_at ELSE read_at END,
                        read_seq = max(read_seq, excluded.read_seq),
                        own_read_time = CASE WHEN excluded.own_read_seq > own_read_seq
                            THEN excluded.own_read_time ELSE own_read_time END,
                        own_read_seq = max(own_read_seq, excluded.own_read_seq)
                    """
            ).execute(arguments: [
                conversation, reader, book.shared.watermark.rawValue, sharedTime,
                book.own.watermark.rawValue, ownTime, read.time.rawValue,
            ])
            if !acks.isEmpty {
                try db.cachedStatement(sql: "DELETE FROM read_ack WHERE conversation_id = ? AND account = ?")
                    .execute(arguments: [conversation, reader])
            }
            for ack in book.readAcks {
                try db.cachedStatement(
                    sql: "INSERT INTO read_ack (conversation_id, account, seq, shared, time) VALUES (?, ?, ?, ?, ?)"
                ).execute(arguments: [
                    conversation, reader, ack.seq.rawValue, ack.shared,
                    ackTimes[ack.seq, default: read.time.rawValue],
                ])
            }
        }
        var receipts: [ReceiptUpdate] = []
        if isGroup, moved.shared {
            receipts = try Self.countReads(db, of: read, newly: book.newlyShared(since: sharedBefore))
        }
        var unread = 0
        if !book.readsEverything(upTo: last) {
            let kept = positions?.kept
            let counted = try Self.unreadCount(
                db,
                of: read.reader,
                in: read.conversation,
                above: book.own.watermark,
                withReadAcks: !book.own.readSeqs.isEmpty,
                last: last,
                kept: kept
            )
            unread = counted.count
            if let now = counted.kept, now != kept {
                try db.cachedStatement(
                    sql: """
                        UPDATE receipt SET unread_from = ?, unread_to = ?, unread_count = ?
                        WHERE conversation_id = ? AND account = ?
                        """
                ).execute(arguments: [now.from.rawValue, now.to.rawValue, now.count, conversation, reader])
            }
        }
        return book.change(
            in: read.conversation,
            reader: read.reader,
            moved: moved,
            ownTime: Timestamp(milliseconds: ownTime),
            sharedTime: Timestamp(milliseconds: sharedTime),
            delivered: storedDelivered,
            unreadCount: unread
        ).with(receipts: receipts)
    }

    public func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int] {
        try await read { db in try Self.unreadCounts(db, of: account) }
    }

    public func readReceiptSettings(
        of account: AccountID
    ) async throws(StorageError) -> StoredReadReceiptSettings {
        try await read { db in
            let rows = try Row.all(
                db.cachedStatement(
                    sql: "SELECT conversation_id, send_read_receipts FROM read_setting WHERE account = ?"
                ),
                arguments: [account.rawValue]
            ) { (account, $0[0] as String, $0[1] as Bool) }
            return StoredReadReceiptSettings.grouped(rows)[account] ?? .init(sendReadReceipts: true, conversations: [:])
        }
    }

    // MARK: Helpers

    /// Turns a time or "everything" into a seq, and checks a seq against the newest message.
    static func resolve(
        _ db: Database,
        _ target: ResolvedRead.Target,
        in conversation: ConversationID,
        last: Seq
    ) throws -> ResolvedRead.Target {
        switch target {
        case .seqs: return target
        case .all: return .upTo(last)
        case .upTo(let seq):
            guard seq <= last else { throw StorageError.seqBeyondLastMessage(last: last) }
            return target
        case .upToTime(let time):
            // Time never decreases along seq, so the messages at or before `time` are a prefix of the log.
            let seq = try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT seq FROM message WHERE conversation_id = ? AND time <= ? ORDER BY seq DESC LIMIT 1"
                ),
                arguments: [conversation.rawValue, time.rawValue]
            )
            return .upTo(Seq(seq ?? 0))
        }
    }

    static func time(_ db: Database, of seq: Seq, in conversation: String) throws -> Int64 {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT time FROM message WHERE conversation_id = ? AND seq = ?"),
            arguments: [conversation, seq.rawValue]
        ) ?? 0
    }

    /// The first `limit` seqs in `range` that count as unread for `reader` (others' messages that count; with `view`,
    /// not deleted or cleared for the reader either), ascending: what a read position's compaction needs
    /// (``ReadPosition/compact(countable:)``).
    static func countableSeqs(
        _ db: Database,
        of reader: String,
        in conversation: String,
        _ range: ClosedRange<Seq>,
        limit: Int,
        view: Bool
    ) throws -> [Seq] {
        let ownView = """

                AND m.seq > coalesce((SELECT cleared_seq FROM conversation_view
                    WHERE conversation_id = ?1 AND account = ?2), 0)
                AND NOT EXISTS (SELECT 1 FROM deleted_message d
                    WHERE d.conversation_id = ?1 AND d.account = ?2 AND d.seq = m.seq)
            """
        return try Int64.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.seq FROM message m
                    WHERE m.conversation_id = ?1 AND m.seq BETWEEN ?3 AND ?4 AND m.sender != ?2 AND m.counts_unread\(view ? ownView : "")
                    ORDER BY m.seq LIMIT ?5
                    """
            ),
            arguments: [conversation, reader, range.lowerBound.rawValue, range.upperBound.rawValue, limit]
        ).map { Seq($0) }
    }

    /// A member's unread count in one conversation, as a read answers it (the hot path of every read): the entries of
    /// others above `watermark` (its own position, just written) and above what it cleared, that count as unread, less
    /// those it read one by one or deleted for itself (ADR 0029).
    ///
    /// A reader with neither has its count kept (``KeptUnread``, ADR 0042): the count it was last answered is moved
    /// along over the seqs read since and the entries appended since, so a read costs what it read and what arrived,
    /// not the whole backlog above it. Counted again over `(position, last]` when that is fewer entries, or when a
    /// recall notice arrived since (a recall makes an earlier entry stop counting). Returns the count, and the kept
    /// count to store when there is one.
    static func unreadCount(
        _ db: Database,
        of account: AccountID,
        in conversation: ConversationID,
        above watermark: Seq,
        withReadAcks: Bool,
        last: Seq,
        kept: KeptUnread?
    ) throws -> (count: Int, kept: KeptUnread?) {
        let (id, reader) = (conversation.rawValue, account.rawValue)
        let deletions = try Bool.fetchOne(
            db.cachedStatement(
                sql: "SELECT EXISTS (SELECT 1 FROM deleted_message WHERE conversation_id = ? AND account = ?)"
            ),
            arguments: [id, reader]
        ) ?? false
        let cleared = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT cleared_seq FROM conversation_view WHERE conversation_id = ? AND account = ?"),
            arguments: [id, reader]
        ) ?? 0
        let floor = max(watermark, Seq(cleared))
        guard withReadAcks || deletions else {
            if let kept,
                let moved = try kept.moved(to: floor, last: last, counting: { after, upTo in
                    try Self.countable(db, of: reader, in: id, after: after, upTo: upTo)
                })
            {
                return (moved.count, moved)
            }
            let count = try Self.countable(db, of: reader, in: id, after: floor, upTo: last).count
            return (count, KeptUnread(from: floor, to: last, count: count))
        }
        var sql = """
            SELECT count(*) FROM message m
            WHERE m.conversation_id = ?1 AND m.sender != ?2 AND m.counts_unread AND m.seq > ?3
            """
        if withReadAcks {
            sql += """

                    AND NOT EXISTS (SELECT 1 FROM read_ack a
                        WHERE a.conversation_id = ?1 AND a.account = ?2 AND a.seq = m.seq)
                """
        }
        if deletions {
            sql += """

                    AND NOT EXISTS (SELECT 1 FROM deleted_message d
                        WHERE d.conversation_id = ?1 AND d.account = ?2 AND d.seq = m.seq)
                """
        }
        let count = try Int.fetchOne(db.cachedStatement(sql: sql), arguments: [id, reader, floor.rawValue]) ?? 0
        return (count, nil)
    }

    /// The entries of others that count as unread in `(after, upTo]` (one range of the log, no sort), and whether a
    /// recall notice is among them.
    static func countable(
        _ db: Database,
        of reader: String,
        in conversation: String,
        after: Seq,
        upTo: Seq
    ) throws -> (count: Int, recalls: Bool) {
        guard upTo > after else { return (0, false) }
        let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT coalesce(sum(sender != ?2 AND counts_unread), 0), coalesce(max(recall IS NOT NULL), 0)
                    FROM message WHERE conversation_id = ?1 AND seq > ?3 AND seq <= ?4
                    """
            ),
            arguments: [conversation, reader, after.rawValue, upTo.rawValue]
        )
        return (row?[0] ?? 0, row?[1] ?? false)
    }

    /// A member's unread count in every conversation it is in.
    static func unreadCounts(_ db: Database, of account: AccountID) throws -> [ConversationID: Int] {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.conversation_id, count(*) FROM conversation_member cm
                    LEFT JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
                    LEFT JOIN conversation_view v ON v.conversation_id = cm.conversation_id AND v.account = cm.account
                    JOIN message m ON m.conversation_id = cm.conversation_id
                        AND m.seq > coalesce(r.own_read_seq, 0) AND m.seq > coalesce(v.cleared_seq, 0)
                        AND m.sender != cm.account AND m.counts_unread
                    WHERE cm.account = ?1
                        AND NOT EXISTS (SELECT 1 FROM read_ack a
                            WHERE a.conversation_id = m.conversation_id AND a.account = cm.account AND a.seq = m.seq)
                        AND NOT EXISTS (SELECT 1 FROM deleted_message d
                            WHERE d.conversation_id = m.conversation_id AND d.account = cm.account AND d.seq = m.seq)
                    GROUP BY m.conversation_id
                    """
            ),
            arguments: [account.rawValue]
        )
        var counts: [ConversationID: Int] = [:]
        for row in rows { counts[ConversationID(rawValue: row[0])] = row[1] }
        return counts
    }
}

extension KeptUnread {
    /// The kept count in `row`'s columns `index…index + 2` (`unread_from`, `unread_to`, `unread_count`), if any.
    init?(_ row: Row, from index: Int) {
        guard let from = row[index] as Int64?, let to = row[index + 1] as Int64?, let count = row[index + 2] as Int?
        else { return nil }
        self.init(from: Seq(from), to: Seq(to), count: count)
    }
}
