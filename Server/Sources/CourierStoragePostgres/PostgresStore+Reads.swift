// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore: ReadStore {
    public func markRead(_ mark: ResolvedRead) async throws(StorageError) -> ReadChange {
        try await transaction { connection in try await markRecordingRead(mark, on: connection) }
    }

    /// A read, what it tells the other nodes and its webhook event, in the caller's transaction.
    func markRecordingRead(_ mark: ResolvedRead, on connection: PostgresConnection) async throws -> ReadChange {
        var changes: [StoreChange] = []
        let change = try await markRead(mark, on: connection, telling: &changes)
        try await publish(changes, events: WebhookEvents.read(mark, change).map { [$0] } ?? [], on: connection)
        return change
    }

    public func markReads(_ marks: [ResolvedRead]) async throws(StorageError) -> [ReadChange] {
        // One transaction: all of the reads, or none. Readers are locked in one order, so two batches never deadlock.
        let ordered = marks.enumerated().sorted { $0.element.reader.rawValue < $1.element.reader.rawValue }
        let changes = try await transaction { connection -> [(Int, ReadChange)] in
            var changes: [(Int, ReadChange)] = []
            for (index, mark) in ordered { changes.append((index, try await markRecordingRead(mark, on: connection))) }
            return changes
        }
        return changes.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// A read in the caller's transaction; what the other nodes must learn of it goes into `changes`.
    func markRead(
        _ mark: ResolvedRead,
        on connection: PostgresConnection,
        telling changes: inout [StoreChange]
    ) async throws -> ReadChange {
        let conversation = mark.conversation.rawValue
        let reader = mark.reader.rawValue
        let isGroup = mark.conversation.kind == .group
        let readerBindings = try PostgresBindings.of(conversation, reader)
        var lastSeq: Int64?
        var created = false
        var positions: (Int64, Int64, Int64, Int64, Int64, Int64)?
        // Read with the positions when they could be: the reader's acks, and the time of the entry the read names.
        var prefetchedAcks: [(seq: Int64, shared: Bool, time: Int64)]?
        var prefetchedTime: (seq: Int64, time: Int64)?
        let named: Int64 =
            switch mark.target {
            case .upTo(let seq): seq.rawValue
            case .all: -1
            case .seqs, .upToTime: 0
            }
        if !isGroup,
            let row = try await connection.run(
                LockReaderInDirect.self,
                .of(conversation, reader, named),
                logger: logger
            ).first
        {
            // A direct chat's reader that has a receipt row (every read after its first): one statement.
            let columns = try row.decode(
                (Int64, Int64, Int64, Int64, Int64, Int64, Int64, Bool, [Int64], [Bool], [Int64], Int64?).self
            )
            lastSeq = columns.0
            positions = (columns.1, columns.2, columns.3, columns.4, columns.5, columns.6)
            if columns.7, columns.8.count == columns.9.count, columns.8.count == columns.10.count {
                prefetchedAcks = columns.8.indices.map { (columns.8[$0], columns.9[$0], columns.10[$0]) }
            }
            if let time = columns.11 { prefetchedTime = (named < 0 ? columns.0 : named, time) }
        } else {
            // A group read holds the group's row shared: no join, leave, append or late ask is half done meanwhile.
            lastSeq = try await self.lastSeq(of: mark.conversation, holdingGroup: isGroup, on: connection)
            if isGroup, lastSeq != nil {
                // Then the group's read lock (transaction-scoped, re-entrant): reads of one group count on the same
                // `receipt_count` rows, each over the range its reader's position newly covers, so two transactions
                // of several reads (the app's backend reporting members' reads) could each hold rows the other needs
                // next — PostgreSQL found such deadlocks under `courier-bench group --postgres-url`. Counting is
                // serialized per group; everything else a read locks comes after this lock.
                _ = try await connection.run(LockGroupReads.self, .of(conversation), logger: logger)
            }
        }
        guard let lastSeq else { throw StorageError.conversationNotFound(mark.conversation) }
        if isGroup, try await memberRow(mark.reader, of: mark.conversation, on: connection) == nil {
            throw StorageError.groupRefused(.actorNotAMember)
        }
        let last = Seq(lastSeq)
        let target = try await resolve(mark.target, in: mark.conversation, last: last, on: connection)
        if positions == nil {
            // The reader's receipt row lock serializes its reads across nodes until commit.
            created = try await !connection.run(CreateReceipt.self, readerBindings, logger: logger).isEmpty
            positions = try await connection.run(LockPositions.self, readerBindings, logger: logger).first
                .map { try $0.decode((Int64, Int64, Int64, Int64, Int64, Int64).self) }
        }
        let row = positions ?? (0, 0, 0, 0, 0, 0)
        let storedOwn = Watermark(seq: Seq(row.0), time: Timestamp(milliseconds: row.1))
        let storedShared = Watermark(seq: Seq(row.2), time: Timestamp(milliseconds: row.3))
        let storedDelivered = Watermark(seq: Seq(row.4), time: Timestamp(milliseconds: row.5))
        var acks: [(seq: Seq, shared: Bool)] = []
        // An ack keeps the time it was first made.
        var ackTimes: [Seq: Int64] = [:]
        if prefetchedAcks == nil {
            prefetchedAcks = try await connection.run(ReadAcks.self, readerBindings, logger: logger).map {
                try $0.decode((Int64, Bool, Int64).self)
            }
        }
        for (seq, shared, time) in prefetchedAcks ?? [] {
            acks.append((Seq(seq), shared))
            ackTimes[Seq(seq)] = time
        }
        var book = ReaderBook(ownWatermark: storedOwn.seq, sharedWatermark: storedShared.seq, acks: acks)
        let sharedBefore = book.shared
        let moved = book.apply(target, last: last, isShared: mark.isShared)
        if let window = book.compactionWindow {
            var own: Set<Seq> = []
            for try await seq in try await connection.query(
                """
                SELECT seq FROM message WHERE conversation_id = \(conversation) AND sender = \(reader)
                AND seq BETWEEN \(window.lowerBound.rawValue) AND \(window.upperBound.rawValue)
                """,
                logger: logger
            ).decode(Int64.self) {
                own.insert(Seq(seq))
            }
            book.compact(skipping: own)
        }
        // The answer is computed from the positions in hand; only what moved is looked up or written.
        func time(of seq: Seq) async throws -> Int64 {
            if let prefetchedTime, prefetchedTime.seq == seq.rawValue { return prefetchedTime.time }
            return try await self.time(of: seq, in: conversation, on: connection)
        }
        let ownTime =
            book.own.watermark == storedOwn.seq
            ? storedOwn.time.rawValue : try await time(of: book.own.watermark)
        let sharedTime =
            book.shared.watermark == storedShared.seq
            ? storedShared.time.rawValue
            : book.shared.watermark == book.own.watermark
                ? ownTime : try await time(of: book.shared.watermark)
        var unreadAfterwards: Int?
        if moved.own || moved.shared {
            let shared = book.shared.watermark.rawValue
            let own = book.own.watermark.rawValue
            // Read implies delivered; every column only moves forward.
            if isGroup {
                _ = try await connection.run(
                    AdvanceRead.self,
                    .of(conversation, reader, shared, sharedTime, mark.time.rawValue, own, ownTime),
                    logger: logger
                )
            } else {
                // In a direct chat the same statement counts what stays unread: entries of the other past the new
                // own position, but for the single-message reads the reader keeps (written just below).
                unreadAfterwards = try await connection.run(
                    AdvanceReadCounting.self,
                    .of(
                        conversation, reader, shared, sharedTime, mark.time.rawValue, own, ownTime,
                        book.ackRows.map(\.seq.rawValue)
                    ),
                    logger: logger
                ).first.map { Int(try $0.decode(Int64.self)) }
            }
            if !acks.isEmpty {
                try await connection.query(
                    "DELETE FROM read_ack WHERE conversation_id = \(conversation) AND account = \(reader)",
                    logger: logger
                )
            }
            for ack in book.ackRows {
                try await connection.query(
                    """
                    INSERT INTO read_ack (conversation_id, account, seq, shared, time)
                    VALUES (\(conversation), \(reader), \(ack.seq.rawValue), \(ack.shared),
                        \(ackTimes[ack.seq, default: mark.time.rawValue]))
                    """,
                    logger: logger
                )
            }
        }
        if created && !moved.own && !moved.shared {
            // A read that changed nothing leaves no row behind, as on SQLite: peers would see a position at 0.
            try await connection.query(
                "DELETE FROM receipt WHERE conversation_id = \(conversation) AND account = \(reader)",
                logger: logger
            )
        }
        var receipts: [GroupReceiptChange] = []
        if isGroup, moved.shared {
            receipts = try await countReads(
                of: mark,
                newly: book.newlyShared(since: sharedBefore),
                on: connection
            )
            changes += receiptChanges(receipts, of: mark)
        } else if moved.shared {
            let change = StoreChange(
                kind: .read,
                conversation: mark.conversation,
                seq: book.shared.watermark,
                account: mark.reader,
                origin: nodeID
            )
            changes.append(change)
        }
        if moved.own {
            let change = StoreChange(
                kind: .readState,
                conversation: mark.conversation,
                seq: book.own.watermark,
                account: mark.reader,
                cause: mark.target.cause,
                origin: nodeID
            )
            changes.append(change)
        }
        var unread = 0
        if !book.readsEverything(upTo: last) {
            if let unreadAfterwards {
                unread = unreadAfterwards
            } else {
                unread = try await unreadCounts(of: mark.reader, in: mark.conversation, on: connection)[mark.conversation] ?? 0
            }
        }
        return book.change(
            in: mark.conversation,
            reader: mark.reader,
            moved: moved,
            ownTime: Timestamp(milliseconds: ownTime),
            sharedTime: Timestamp(milliseconds: sharedTime),
            delivered: storedDelivered,
            unreadCount: unread
        ).with(receipts: receipts)
    }

    /// What tells the other nodes which messages' read counts a group read changed, 200 messages per notification
    /// (a payload stays far below PostgreSQL's 8,000-byte limit).
    func receiptChanges(_ receipts: [GroupReceiptChange], of mark: ResolvedRead) -> [StoreChange] {
        let acked: Set<Seq>
        if case .seqs(let seqs) = mark.target { acked = Set(seqs) } else { acked = [] }
        return stride(from: 0, to: receipts.count, by: 200).map { start in
            let seqs = receipts[start..<min(start + 200, receipts.count)].map(\.seq)
            let withContent = mark.content == nil ? [] : seqs.filter { acked.contains($0) }
            return StoreChange(
                kind: .read,
                conversation: mark.conversation,
                seq: seqs.last ?? .zero,
                account: mark.reader,
                origin: nodeID,
                receipts: seqs,
                time: mark.time,
                content: withContent.isEmpty ? nil : mark.content,
                acked: withContent.isEmpty ? nil : withContent
            )
        }
    }

    public func readState(
        of reader: AccountID,
        in conversation: ConversationID
    ) async throws(StorageError) -> ReadState {
        try await withPooledConnection { connection in
            try await ownReadState(of: reader, in: conversation, on: connection)
        }
    }

    public func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int] {
        try await withPooledConnection { connection in
            try await unreadCounts(of: account, in: nil, on: connection)
        }
    }

    public func readReceiptSettings(
        of account: AccountID
    ) async throws(StorageError) -> StoredReadReceiptSettings {
        try await withPooledConnection { connection in
            var rows: [(AccountID, String, Bool)] = []
            for row in try await connection.run(ReadSettings.self, .of(account.rawValue), logger: logger) {
                let (id, value) = try row.decode((String, Bool).self)
                rows.append((account, id, value))
            }
            return StoredReadReceiptSettings.grouped(rows)[account] ?? .init(sendReadReceipts: true, conversations: [:])
        }
    }

    public func readReceiptSettings(
        of accounts: [AccountID],
        in conversation: ConversationID
    ) async throws(StorageError) -> [AccountID: StoredReadReceiptSettings] {
        try await withPooledConnection { connection in
            var rows: [(AccountID, String, Bool)] = []
            for try await (account, id, value) in try await connection.query(
                """
                SELECT account, conversation_id, send_read_receipts FROM read_setting
                WHERE account = ANY(\(accounts.map(\.rawValue))) AND conversation_id IN ('', \(conversation.rawValue))
                """,
                logger: logger
            ).decode((String, String, Bool).self) {
                rows.append((AccountID(rawValue: account), id, value))
            }
            return StoredReadReceiptSettings.grouped(rows)
        }
    }

    public func setSendReadReceipts(
        _ value: Bool,
        for account: AccountID,
        in conversation: ConversationID?
    ) async throws(StorageError) {
        try await withPooledConnection { connection in
            try await connection.query(
                """
                INSERT INTO read_setting (account, conversation_id, send_read_receipts)
                VALUES (\(account.rawValue), \(conversation?.rawValue ?? ""), \(value))
                ON CONFLICT (account, conversation_id) DO UPDATE SET send_read_receipts = EXCLUDED.send_read_receipts
                """,
                logger: logger
            )
        }
    }

    // MARK: Helpers

    func resolve(
        _ target: ResolvedRead.Target,
        in conversation: ConversationID,
        last: Seq,
        on connection: PostgresConnection
    ) async throws -> ResolvedRead.Target {
        switch target {
        case .seqs: return target
        case .all: return .upTo(last)
        case .upTo(let seq):
            guard seq <= last else { throw StorageError.seqBeyondLastMessage(last: last) }
            return target
        case .upToTime(let time):
            // Time never decreases along seq, so the messages at or before `time` are a prefix of the log.
            let seq = try await connection.query(
                """
                SELECT seq FROM message WHERE conversation_id = \(conversation.rawValue) AND time <= \(time.rawValue)
                ORDER BY seq DESC LIMIT 1
                """,
                logger: logger
            ).decode(Int64.self).first { _ in true }
            return .upTo(Seq(seq ?? 0))
        }
    }

    func time(of seq: Seq, in conversation: String, on connection: PostgresConnection) async throws -> Int64 {
        try await connection.run(MessageTime.self, .of(conversation, seq.rawValue), logger: logger).first?
            .decode(Int64.self) ?? 0
    }

    func ownReadState(
        of reader: AccountID,
        in conversation: ConversationID,
        on connection: PostgresConnection
    ) async throws -> ReadState {
        let receipts = try await memberReceipts(conversation, shared: false, reader, on: connection)
        return ReadState(
            conversation: conversation,
            watermark: receipts.read,
            readSeqs: receipts.readSeqs,
            unreadCount: try await unreadCounts(of: reader, in: conversation, on: connection)[conversation] ?? 0
        )
    }

    /// One member's receipts: the shared reading position, or its own (`shared == false`).
    func memberReceipts(
        _ conversation: ConversationID,
        shared: Bool,
        _ account: AccountID,
        on connection: PostgresConnection
    ) async throws -> MemberReceipts {
        let fetched =
            try await connection.query(
                """
                SELECT delivered_seq, delivered_time, read_seq, read_time, own_read_seq, own_read_time
                FROM receipt WHERE conversation_id = \(conversation.rawValue) AND account = \(account.rawValue)
                """,
                logger: logger
            ).decode((Int64, Int64, Int64, Int64, Int64, Int64).self).first { _ in true }
        let row = fetched ?? (0, 0, 0, 0, 0, 0)
        let delivered = Watermark(seq: Seq(row.0), time: Timestamp(milliseconds: row.1))
        let read =
            shared
            ? Watermark(seq: Seq(row.2), time: Timestamp(milliseconds: row.3))
            : Watermark(seq: Seq(row.4), time: Timestamp(milliseconds: row.5))
        var readSeqs: [Seq] = []
        for try await seq in try await connection.query(
            """
            SELECT seq FROM read_ack WHERE conversation_id = \(conversation.rawValue) AND account = \(account.rawValue)
            AND seq > \(read.seq.rawValue) AND (shared OR \(!shared)) ORDER BY seq
            """,
            logger: logger
        ).decode(Int64.self) {
            readSeqs.append(Seq(seq))
        }
        return MemberReceipts(account: account, delivered: delivered, read: read, readSeqs: readSeqs)
    }

    /// Messages of others above the reader's own watermark and not read one by one, per conversation.
    func unreadCounts(
        of account: AccountID,
        in conversation: ConversationID?,
        on connection: PostgresConnection
    ) async throws -> [ConversationID: Int] {
        var counts: [ConversationID: Int] = [:]
        if let conversation {
            let row = try await connection.run(
                UnreadCountIn.self,
                .of(account.rawValue, conversation.rawValue),
                logger: logger
            ).first
            if let count = try row?.decode(Int64.self), count > 0 { counts[conversation] = Int(count) }
            return counts
        }
        for row in try await connection.run(UnreadCounts.self, .of(account.rawValue), logger: logger) {
            let (id, count) = try row.decode((String, Int64).self)
            counts[ConversationID(rawValue: id)] = Int(count)
        }
        return counts
    }
}

extension PostgresStore {
    /// A conversation's last seq; in a group, holding its row shared (no join, leave, append or late ask is half done
    /// meanwhile).
    func lastSeq(
        of conversation: ConversationID,
        holdingGroup: Bool,
        on connection: PostgresConnection
    ) async throws -> Int64? {
        let bindings = try PostgresBindings.of(conversation.rawValue)
        let row =
            holdingGroup
            ? try await connection.run(LastSeqHoldingGroup.self, bindings, logger: logger).first
            : try await connection.run(LastSeq.self, bindings, logger: logger).first
        return try row?.decode(Int64.self)
    }

    /// A transaction-scoped advisory lock on a group's reads (class 7460212, the group id's hash).
    enum LockGroupReads: HotStatement {
        static let sql = "SELECT pg_advisory_xact_lock(7460212, hashtext($1))::text"
    }

    enum LastSeq: HotStatement {
        static let sql = "SELECT last_seq FROM conversation WHERE id = $1"
    }

    enum LastSeqHoldingGroup: HotStatement {
        static let sql = LastSeq.sql + " FOR SHARE"
    }

    /// A reader's receipt row, created empty if it has none (`RETURNING 1` when it was created).
    enum CreateReceipt: HotStatement {
        static let sql = """
            INSERT INTO receipt (conversation_id, account) VALUES ($1, $2)
            ON CONFLICT (conversation_id, account) DO NOTHING RETURNING 1
            """
    }

    /// A reader's positions, its row locked until commit: its reads are serialized across nodes.
    enum LockPositions: HotStatement {
        static let sql = """
            SELECT own_read_seq, own_read_time, read_seq, read_time, delivered_seq, delivered_time
            FROM receipt WHERE conversation_id = $1 AND account = $2 FOR UPDATE
            """
    }

    /// A direct chat's last seq with a reader's positions, its receipt row locked (``LockPositions``); no row when
    /// the reader has none yet. The last seq is the statement's snapshot: every entry committed before the read
    /// began.
    ///
    /// With them, in the same statement: whether the row is still the version of the statement's snapshot (it is
    /// unless another read of this reader committed while this one waited for the lock), the reader's acks as that
    /// snapshot has them — current only then, since only a read that updates the row writes acks — and the time of
    /// the entry at `$3` (`-1`: the last one).
    enum LockReaderInDirect: HotStatement {
        static let sql = """
            SELECT c.last_seq, r.own_read_seq, r.own_read_time, r.read_seq, r.read_time, r.delivered_seq,
                r.delivered_time,
                r.stamp = (SELECT s.stamp FROM receipt s WHERE s.conversation_id = $1 AND s.account = $2),
                ARRAY(SELECT a.seq FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                ARRAY(SELECT a.shared FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                ARRAY(SELECT a.time FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                (SELECT m.time FROM message m
                 WHERE m.conversation_id = c.id AND m.seq = CASE WHEN $3 < 0 THEN c.last_seq ELSE $3 END)
            FROM conversation c JOIN receipt r ON r.conversation_id = c.id AND r.account = $2
            WHERE c.id = $1 FOR UPDATE OF r
            """
    }

    /// A reader's single-message reads past its watermarks.
    enum ReadAcks: HotStatement {
        static let sql = "SELECT seq, shared, time FROM read_ack WHERE conversation_id = $1 AND account = $2"
    }

    /// Moves a reader's positions forward (`$3`/`$4` shared seq and time, `$5` when, `$6`/`$7` own seq and time):
    /// read implies delivered; every column only moves forward.
    enum AdvanceRead: HotStatement {
        static let sql = """
            UPDATE receipt SET
                delivered_time = CASE WHEN $3 > delivered_seq THEN $4 ELSE delivered_time END,
                delivered_seq = GREATEST(delivered_seq, $3),
                read_time = CASE WHEN $3 > read_seq THEN $4 ELSE read_time END,
                read_at = CASE WHEN $3 > read_seq THEN $5 ELSE read_at END,
                delivered_at = CASE WHEN $3 > delivered_seq THEN $5 ELSE delivered_at END,
                read_seq = GREATEST(read_seq, $3),
                own_read_time = CASE WHEN $6 > own_read_seq THEN $7 ELSE own_read_time END,
                own_read_seq = GREATEST(own_read_seq, $6),
                stamp = change_stamp()
            WHERE conversation_id = $1 AND account = $2
            """
    }

    /// ``AdvanceRead`` returning the reader's unread count afterwards in a direct chat: the other's entries that
    /// count as unread past the new own position (`$6`), but for the acks the reader keeps (`$8`).
    enum AdvanceReadCounting: HotStatement {
        static let sql = AdvanceRead.sql + """

            RETURNING (SELECT count(*) FROM message m
                WHERE m.conversation_id = $1 AND m.seq > $6 AND m.sender <> $2 AND m.counts_unread
                    AND NOT (m.seq = ANY($8::int8[])))
            """
    }

    enum MessageTime: HotStatement {
        static let sql = "SELECT time FROM message WHERE conversation_id = $1 AND seq = $2"
    }

    enum ReadSettings: HotStatement {
        static let sql = "SELECT conversation_id, send_read_receipts FROM read_setting WHERE account = $1"
    }

    /// An account's unread count in one conversation: entries of others past its own position that count as unread
    /// and that it has not read one by one.
    enum UnreadCountIn: HotStatement {
        static let sql = "SELECT count(*) \(unread) AND cm.conversation_id = $2"
    }

    /// ``UnreadCountIn`` for every conversation of the account that has unread entries.
    enum UnreadCounts: HotStatement {
        static let sql = "SELECT m.conversation_id, count(*) \(unread) GROUP BY m.conversation_id"
    }

    /// The entries unread by account `$1`, from its memberships (its `WHERE` open for more conditions).
    static let unread = """
        FROM conversation_member cm
        LEFT JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
        JOIN message m ON m.conversation_id = cm.conversation_id
            AND m.seq > coalesce(r.own_read_seq, 0) AND m.sender != cm.account AND m.counts_unread
        WHERE cm.account = $1
            AND NOT EXISTS (SELECT 1 FROM read_ack a
                WHERE a.conversation_id = m.conversation_id AND a.account = cm.account AND a.seq = m.seq)
        """
}
