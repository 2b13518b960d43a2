// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierTestSupport
import CourierWire
import GRDB
import Testing

@testable import CourierStorageSQLite

/// Reads of one reader in one conversation that wait for the writer become one write (ADR 0037): a device that reads
/// each message as it arrives costs one write per commit, not one per message, and nobody's answer changes.
@Suite("SQLite: reads that wait together are written together", .timeLimit(.minutes(2)))
struct ReadCoalescingTests {
    let conversation = ConversationID.direct("alice", "bob")

    /// alice and bob exist, bob sent messages 1…3, and an endpoint records the webhook events; returns where its log
    /// starts.
    func seed(_ store: SQLiteStore) async throws -> WebhookCursor {
        try await store.registerAccount("alice", at: 0)
        try await store.registerAccount("bob", at: 0)
        let endpoint = WebhookEndpoint(id: "whep_1", url: "http://127.0.0.1:9/", events: nil, secret: "whsec_x", createdAt: 0)
        try await store.createWebhookEndpoint(endpoint)
        let start = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 1, until: 2, held: nil)).cursor
        for seq in 1...3 {
            _ = try await store.append(
                MessageDraft(
                    id: MessageID(rawValue: "m\(seq)"),
                    conversation: conversation,
                    clientID: ClientMessageID(rawValue: "c\(seq)"),
                    sender: "bob",
                    time: Timestamp(milliseconds: Int64(100 * seq)),
                    body: "body \(seq)"
                )
            )
        }
        return start
    }

    func read(_ target: ResolvedRead.Target) -> ResolvedRead {
        ResolvedRead(reader: "alice", conversation: conversation, target: target, isShared: true, time: 1_000)
    }

    /// Runs `targets` as reads queued behind a write that holds the store's thread: the first leads, the others join
    /// it, then the writer is let go. Returns each read's outcome, in order.
    func readWhileHeld(
        _ store: SQLiteStore,
        _ targets: [ResolvedRead.Target]
    ) async throws -> [Result<ReadOutcome, StorageError>] {
        let gate = ThreadGate()
        let holder = Task { try await store.write { _ in gate.wait() } }
        while !gate.isWaiting { await Task.yield() }
        var reads: [Task<Result<ReadOutcome, StorageError>, Never>] = []
        for (index, target) in targets.enumerated() {
            let mark = read(target)
            reads.append(Task { () async -> Result<ReadOutcome, StorageError> in
                do throws(StorageError) { return .success(try await store.markRead(mark)) } catch { return .failure(error) }
            })
            // In this order: the first is queued for the writer, the next ones joined it.
            if index == 0 {
                while store.groupCommit.queuedCount < 1 { await Task.yield() }
            } else {
                while store.pendingReads.joinedCount < index { await Task.yield() }
            }
        }
        gate.open()
        try await holder.value
        var outcomes: [Result<ReadOutcome, StorageError>] = []
        for read in reads { outcomes.append(await read.value) }
        return outcomes
    }

    @Test("three reads waiting for the writer are one write and one event; each is answered with the state after it")
    func readsWaitingTogether() async throws {
        let store = try SQLiteStore(location: .inMemory)
        let start = try await seed(store)
        let commits = Locked(0)
        store.commits.add { record in commits.withLock { $0 += record.operations } }

        let outcomes = try await readWhileHeld(store, [.seqs([1]), .seqs([2]), .seqs([3])])

        let changes = try outcomes.map { try $0.get() }
        // Each is answered with everything read: the three messages fold into the watermark.
        #expect(changes.allSatisfy { $0.own.watermark.seq == 3 && $0.own.unreadCount == 0 && $0.own.readSeqs.isEmpty })
        // One of them tells the others (its change); the ones that joined it change nothing of their own.
        #expect(changes.map(\.ownChanged) == [true, false, false])
        #expect(changes[0].shared?.read.seq == 3)
        // One operation in the writer's transaction (the holder's was another), and one `message.read` event.
        #expect(commits.withLock { $0 } == 2)
        let events = try await store.webhookEvents(after: start, limit: 100, maxBytes: 1 << 20)
        #expect(events.filter { $0.type == .messageRead }.count == 1)
        #expect(try await store.unreadCounts(of: "alice")[conversation, default: 0] == 0)
    }

    @Test("a read that would be refused alone is refused alone; the reads it waited with are written")
    func refusedAlone() async throws {
        let store = try SQLiteStore(location: .inMemory)
        _ = try await seed(store)

        let outcomes = try await readWhileHeld(store, [.upTo(1), .upTo(99), .upTo(2)])

        #expect(try outcomes[0].get().own.watermark.seq >= 1)
        #expect(throws: StorageError.self) { try outcomes[1].get() }
        #expect(try outcomes[2].get().own.watermark.seq == 2)
        #expect(try await store.unreadCounts(of: "alice")[conversation, default: 0] == 1)
    }
}
