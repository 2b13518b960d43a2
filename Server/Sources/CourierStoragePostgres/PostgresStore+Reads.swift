// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
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

    /// A read, what it tells the other nodes and its webhook event, in the caller's transaction. A group read holds
    /// the group's row shared (no join, leave, append or late ask is half done meanwhile) and the group's read lock
    /// (transaction-scoped, re-entrant), both before anything else: reads of one group count on the same `receipt_count` rows, each over
    /// the range its reader's position newly covers, so two transactions of several reads (the app's backend
    /// reporting members' reads) could each hold rows the other needs next — PostgreSQL found such deadlocks under
    /// `courier-bench group --postgres-url`. Counting is serialized per group; everything else a read locks, its
    /// reader's receipt row first, comes after.
    func markRecordingRead(_ read: ResolvedRead, on connection: PostgresConnection) async throws -> ReadOutcome {
        if read.conversation.kind == .group {
            _ = try await connection.run(HoldGroupReads.self, .of(read.conversation.rawValue), logger: logger)
        }
        let marked = try await connection.run(MarkReadProcedure([read]), logger: logger)
        var outcome = marked.outcome
        if let newly = marked.newlyShared {
            outcome = outcome.with(receipts: try await connection.run(CountReadsProcedure(read, newly: newly), logger: logger))
        }
        outcome = outcome.recorded(for: read)
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

    // MARK: Helpers

    func time(of seq: Seq, in conversation: String, on connection: PostgresConnection) async throws -> Int64 {
        try await connection.run(MessageTime.self, .of(conversation, seq.rawValue), logger: logger).first?
            .decode(Int64.self) ?? 0
    }
}
