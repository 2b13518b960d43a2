// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
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
        let marked = try db.run(MarkReadProcedure(reads))
        var outcome = marked.outcome
        if let newly = marked.newlyShared {
            outcome = outcome.with(receipts: try countReads(db, of: reads[0], newly: newly))
        }
        outcome = outcome.recorded(for: reads[0])
        try announce(db, outcome.change)
        return outcome
    }
}
