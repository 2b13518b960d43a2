// Courier — Apache-2.0
public import CourierStorage
public import CourierSQL
public import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore: ReadStore {
    /// `whenQueued` is never called: a read's batch is not known to commit in the order reads arrive, so the next
    /// read of the device waits for this one's answer.
    public func markRead(
        _ read: ResolvedRead,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> ReadOutcome {
        guard read.conversation.kind == .direct else {
            return try await transaction { connection in try await markRecordingRead(read, on: connection) }
        }
        switch await directReads.submit(read, run: { batch in await self.markDirectReads(batch) }) {
        case .done(let read): return try read.get()
        case .unreachable(let reason): throw .unreachable(reason)
        case .notTaken, .failed:
            return try await transaction { connection in try await markRecordingRead(read, on: connection) }
        }
    }

    /// Direct chats' reads of many devices in one transaction on one connection (ADR 0035): each read's statements in
    /// turn, readers in one order (as ``markReads(_:)`` orders them, and as a batch of deliveries locks receipt rows),
    /// one commit for all. A read refused before it wrote anything is that read's answer; any other failure rolls the
    /// batch back, and each of its reads takes a transaction of its own.
    func markDirectReads(_ batch: [ResolvedRead]) async -> [BatchOutcome<Result<ReadOutcome, StorageError>>] {
        let order = batch.indices.sorted {
            Self.lockOrder(batch[$0].reader, batch[$0].conversation) < Self.lockOrder(batch[$1].reader, batch[$1].conversation)
        }
        let started = ContinuousClock.now
        let outcomes: [BatchOutcome<Result<ReadOutcome, StorageError>>]
        do {
            let (client, logger) = (self.client, self.logger)
            outcomes = try await leasing { leased in
                try await client.withTransaction(logger: logger) { connection in
                    leased(connection)
                    var outcomes = [BatchOutcome<Result<ReadOutcome, StorageError>>](repeating: .failed, count: batch.count)
                    for index in order {
                        do {
                            outcomes[index] = .done(.success(try await markRecordingRead(batch[index], on: connection)))
                        } catch let error as StorageError where Self.isRefusedBeforeWriting(error) {
                            outcomes[index] = .done(.failure(error))
                        }
                    }
                    return outcomes
                }
            }
        } catch {
            if case .unreachable(let reason) = failure(error) { return batch.map { _ in .unreachable(reason) } }
            return batch.map { _ in .failed }
        }
        let read = outcomes.count { if case .done(.success) = $0 { true } else { false } }
        if read > 0 { commits.record(operations: read, duration: ContinuousClock.now - started) }
        return outcomes
    }

    /// The refusals ``markRead(_:on:)`` decides before its first write (from the head, the membership and the
    /// target), so that the batch's other reads may go on. Anything else fails the batch.
    static func isRefusedBeforeWriting(_ error: StorageError) -> Bool {
        switch error {
        case .conversationNotFound, .seqBeyondLastMessage, .groupRefused: true
        default: false
        }
    }

    /// The order receipt rows are locked in by a batch: by account, then conversation.
    static func lockOrder(_ account: AccountID, _ conversation: ConversationID) -> String {
        account.rawValue + "\u{0}" + conversation.rawValue
    }

    /// A read, what it tells the other nodes and its webhook event, in the caller's transaction.
    func markRecordingRead(_ read: ResolvedRead, on connection: PostgresConnection) async throws -> ReadOutcome {
        let outcome = try await markRead(read, on: connection).recorded(for: read)
        try await announce(outcome.change, on: connection)
        return outcome
    }

    public func markReads(_ reads: [ResolvedRead]) async throws(StorageError) -> [ReadOutcome] {
        // One transaction: all of the reads, or none. Receipt rows are locked in one order (``lockOrder(_:_:)``, as
        // batches of direct reads and deliveries lock them), so two such transactions never deadlock.
        let ordered = reads.enumerated().sorted {
            Self.lockOrder($0.element.reader, $0.element.conversation) < Self.lockOrder($1.element.reader, $1.element.conversation)
        }
        let changes = try await transaction { connection -> [(Int, ReadOutcome)] in
            var changes: [(Int, ReadOutcome)] = []
            for (index, read) in ordered { changes.append((index, try await markRecordingRead(read, on: connection))) }
            return changes
        }
        return changes.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// A read in the caller's transaction.
    func markRead(_ read: ResolvedRead, on connection: PostgresConnection) async throws -> ReadOutcome {
        let conversation = read.conversation.rawValue
        let reader = read.reader.rawValue
        let isGroup = read.conversation.kind == .group
        let readerBindings = try PostgresBindings.of(conversation, reader)
        var lastSeq: Int64?
        var created = false
        var positions: (Int64, Int64, Int64, Int64, Int64, Int64)?
        // Read with the positions when they could be: the reader's acks, and the time of the entry the read names.
        var prefetchedAcks: [(seq: Int64, shared: Bool, time: Int64)]?
        var prefetchedTime: (seq: Int64, time: Int64)?
        let named: Int64 =
            switch read.target {
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
            lastSeq = try await self.lastSeq(of: read.conversation, holdingGroup: isGroup, on: connection)
            if isGroup, lastSeq != nil {
                // Then the group's read lock (transaction-scoped, re-entrant): reads of one group count on the same
                // `receipt_count` rows, each over the range its reader's position newly covers, so two transactions
                // of several reads (the app's backend reporting members' reads) could each hold rows the other needs
                // next — PostgreSQL found such deadlocks under `courier-bench group --postgres-url`. Counting is
                // serialized per group; everything else a read locks comes after this lock.
                _ = try await connection.run(LockGroupReads.self, .of(conversation), logger: logger)
            }
        }
        guard let lastSeq else { throw StorageError.conversationNotFound(read.conversation) }
        if isGroup, try await memberRow(read.reader, of: read.conversation, on: connection) == nil {
            throw StorageError.groupRefused(.actorNotAMember)
        }
        let last = Seq(lastSeq)
        let target = try await resolve(read.target, in: read.conversation, last: last, on: connection)
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
        var moved = book.apply(target, isShared: read.isShared)
        // The first seqs of a probe's range that count as unread for the reader (ReadPosition.compact); the own
        // position also steps over what the reader deleted or cleared for itself (`view`), the shared one does not.
        func countable(_ probe: (range: ClosedRange<Seq>, limit: Int)?, view: Bool) async throws -> [Seq]? {
            guard let probe else { return nil }
            let ownView: PostgresQuery =
                view
                ? """
                SELECT m.seq FROM message m
                WHERE m.conversation_id = \(conversation) AND m.seq BETWEEN \(probe.range.lowerBound.rawValue)
                    AND \(probe.range.upperBound.rawValue) AND m.sender <> \(reader) AND m.counts_unread
                    AND m.seq > coalesce((SELECT cleared_seq FROM conversation_view
                        WHERE conversation_id = \(conversation) AND account = \(reader)), 0)
                    AND NOT EXISTS (SELECT 1 FROM deleted_message d
                        WHERE d.conversation_id = \(conversation) AND d.account = \(reader) AND d.seq = m.seq)
                ORDER BY m.seq LIMIT \(probe.limit)
                """
                : """
                SELECT m.seq FROM message m
                WHERE m.conversation_id = \(conversation) AND m.seq BETWEEN \(probe.range.lowerBound.rawValue)
                    AND \(probe.range.upperBound.rawValue) AND m.sender <> \(reader) AND m.counts_unread
                ORDER BY m.seq LIMIT \(probe.limit)
                """
            var seqs: [Seq] = []
            for try await seq in try await connection.query(ownView, logger: logger).decode(Int64.self) {
                seqs.append(Seq(seq))
            }
            return seqs
        }
        let ownBefore = book.own
        let probes = book.compactionProbes
        book.compact(
            own: try await countable(probes.own, view: true),
            shared: try await countable(probes.shared, view: false)
        )
        // A fold alone moves a position too (what counts as unread can shrink after acks were stored: a recall, a
        // delete for me): it is written and announced like any move.
        moved = (moved.own || book.own != ownBefore, moved.shared || book.shared != sharedBefore)
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
                    .of(conversation, reader, shared, sharedTime, read.time.rawValue, own, ownTime),
                    logger: logger
                )
            } else {
                // In a direct chat the same statement counts what stays unread: entries of the other past the new
                // own position, but for the single-message reads the reader keeps (written just below).
                unreadAfterwards = try await connection.run(
                    AdvanceReadCounting.self,
                    .of(
                        conversation, reader, shared, sharedTime, read.time.rawValue, own, ownTime,
                        book.readAcks.map(\.seq.rawValue)
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
            for ack in book.readAcks {
                try await connection.query(
                    """
                    INSERT INTO read_ack (conversation_id, account, seq, shared, time)
                    VALUES (\(conversation), \(reader), \(ack.seq.rawValue), \(ack.shared),
                        \(ackTimes[ack.seq, default: read.time.rawValue]))
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
        var receipts: [ReceiptUpdate] = []
        if isGroup, moved.shared {
            receipts = try await connection.run(
                CountReadsProcedure(read, newly: book.newlyShared(since: sharedBefore)),
                logger: logger
            )
        }
        var unread = 0
        if !book.readsEverything(upTo: last) {
            if let unreadAfterwards {
                unread = unreadAfterwards
            } else {
                unread = try await unreadCounts(of: read.reader, in: read.conversation, on: connection)[read.conversation] ?? 0
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
}
