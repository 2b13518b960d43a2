// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierTestSupport
import CourierWire
import Testing

/// The event log, the endpoints' cursors and the parked deliveries' bookkeeping, on every backend (ADR 0030).
@Suite("Storage contract: webhook deliveries", .timeLimit(.minutes(5)))
struct WebhookStoreContractTests {
    static let backends = StorageBackend.available
    let conversation = ConversationID.direct("alice", "bob")

    /// Alice and bob, and one endpoint that takes every event type.
    static func prepare(_ store: any CourierStore) async throws -> WebhookEndpoint {
        for account: AccountID in ["alice", "bob"] { try await store.registerAccount(account, at: 0) }
        let endpoint = WebhookEndpoint(id: "whep_1", url: "http://127.0.0.1:9/", events: nil, secret: "whsec_x", createdAt: 0)
        try await store.createWebhookEndpoint(endpoint)
        return endpoint
    }

    /// `count` messages from alice to bob, at 1000, 1001, …
    func send(_ count: Int, in store: any CourierStore) async throws {
        for index in 0..<count {
            _ = try await store.append(
                MessageDraft(
                    id: MessageID(rawValue: "m-\(index)"), conversation: conversation,
                    clientID: ClientMessageID(rawValue: "m-\(index)"), sender: "alice",
                    time: Timestamp(milliseconds: Int64(1000 + index)), body: "hi"
                )
            )
        }
    }

    @Test("an endpoint reads the log from its cursor under a lease; the cursor and what it parks move together", arguments: backends)
    func stream(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            try await send(3, in: store)
            let lease = Timestamp(milliseconds: 20_000)
            let stream = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: lease, held: nil))
            // Held: another node (or a second look) gets nothing until the lease ends.
            #expect(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: 30_000, held: nil) == nil)
            // The node that holds it renews it by naming its lease; a wrong one is refused.
            #expect(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: 30_000, held: 19_000) == nil)
            #expect(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: lease, held: lease)?.cursor == stream.cursor)
            let events = try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: 1 << 20)
            #expect(events.map(\.type) == [.messageCreated, .messageCreated, .messageCreated])
            #expect(events.map(\.cursor) == events.map(\.cursor).sorted())
            #expect(try await store.pendingWebhookDeliveries() == 3)
            // A batch that limit cuts reads on after it.
            #expect(try await store.webhookEvents(after: events[0].cursor, limit: 10, maxBytes: 1 << 20).map(\.id) == events.dropFirst().map(\.id))
            // A byte budget ends a batch with the event that reaches it; the first comes whatever its size.
            #expect(try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: 1).map(\.id) == [events[0].id])
            let two = events[0].payload.utf8.count + 1
            #expect(try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: two).map(\.id) == events.prefix(2).map(\.id))

            // A move under a lease that is not held changes nothing.
            let parking = [
                WebhookParking(event: events[1], attempts: 1, nextAttemptAt: 15_000, lastStatus: 503, lastError: "busy"),
                WebhookParking(event: events[2], nextAttemptAt: 11_000),
            ]
            #expect(try await !store.advanceWebhookStream(
                of: endpoint.id, lease: 19_999, to: events[2].cursor, parking: parking, attempts: [], answeredAt: nil, leaseAfter: 0))
            #expect(try await store.webhookDeliveries(of: endpoint.id, state: .pending, before: nil, limit: 10).count == 3)
            #expect(try await store.parkedWebhookQueues(of: endpoint.id, among: [conversation]).isEmpty)

            #expect(try await store.advanceWebhookStream(
                of: endpoint.id, lease: lease, to: events[2].cursor, parking: parking, attempts: [], answeredAt: 11_000, leaseAfter: 0))
            let listed = try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10)
            #expect(listed.map(\.position) == events.map(\.position).reversed())
            #expect(listed.map(\.eventID) == events.map(\.id).reversed())
            #expect(listed.map(\.state) == [.pending, .pending, .delivered])
            #expect(listed.map(\.attempts) == [0, 1, 1])
            #expect(listed[1].lastStatus == 503 && listed[1].nextAttemptAt == 15_000)
            #expect(try await store.parkedWebhookQueues(of: endpoint.id, among: [conversation]) == [conversation])
            #expect(try await store.pendingWebhookDeliveries() == 2)
            // The stream is free again, from the new cursor: nothing more to read.
            let next = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_001, until: lease, held: nil))
            #expect(next.cursor == events[2].cursor)
            #expect(try await store.webhookEvents(after: next.cursor, limit: 10, maxBytes: 1 << 20).isEmpty)
            // Paging the list by position.
            let older = try await store.webhookDeliveries(of: endpoint.id, state: nil, before: listed[1].position, limit: 10)
            #expect(older.map(\.position) == [listed[2].position])
        }
    }

    @Test("an event a recall erased while its batch was being sent is not parked again, and takes no body back", arguments: backends)
    func recallWhileSending(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            try await send(1, in: store)
            let lease = Timestamp(milliseconds: 20_000)
            let stream = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: lease, held: nil))
            let events = try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: 1 << 20)
            try #require(events.count == 1)
            // The endpoint answers 503 while the message is recalled.
            _ = try await store.recall(
                MessageDraft(
                    id: "n1", conversation: conversation, clientID: "recall:m-0", sender: "alice", time: 2000, body: "",
                    recall: WireRecallNotice(messageID: "m-0", sender: "alice", recalledBy: "alice", mode: .twoWay)
                ),
                rules: .members
            )
            #expect(try await store.advanceWebhookStream(
                of: endpoint.id, lease: lease, to: events[0].cursor,
                parking: [WebhookParking(event: events[0], attempts: 1, nextAttemptAt: 15_000, lastStatus: 503)],
                attempts: [], answeredAt: nil, leaseAfter: 0
            ))
            let listed = try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10)
            #expect(listed.map(\.type) == [.messageRecalled], "the recall's own event only")
            #expect(!listed.contains { $0.payload.contains("\"hi\"") })
            #expect(try await store.parkedWebhookQueues(of: endpoint.id, among: [conversation]).isEmpty)
        }
    }

    @Test("pruning deletes finished deliveries and passed events past the cutoff, a batch at a time, and never a pending one", arguments: backends)
    func pruning(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            try await send(3, in: store)
            let lease = Timestamp(milliseconds: 20_000)
            let stream = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: lease, held: nil))
            let events = try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: 1 << 20)
            try #require(events.count == 3)
            // Nothing passed by the cursor: however old, the log keeps it.
            #expect(try await store.pruneWebhookDeliveries(before: Timestamp(milliseconds: .max), limit: 10) == 0)
            _ = try await store.advanceWebhookStream(
                of: endpoint.id, lease: lease, to: events[1].cursor,
                parking: [WebhookParking(event: events[1], state: .failed, attempts: 1, nextAttemptAt: 6000, lastError: "down")],
                attempts: [], answeredAt: nil, leaseAfter: 0
            )
            func listed() async throws -> [WebhookDelivery.State] {
                try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10).map(\.state)
            }
            #expect(try await listed() == [.pending, .failed, .delivered])
            // Before the cutoff: the first event (1000, passed) and its parked copy's event; the failed delivery's
            // last attempt was due at 6000.
            #expect(try await store.pruneWebhookDeliveries(before: 1001, limit: 10) == 1)
            #expect(try await listed() == [.pending, .failed])
            #expect(try await store.pruneWebhookDeliveries(before: 6001, limit: 1) == 1)
            #expect(try await store.pruneWebhookDeliveries(before: 6001, limit: 10) == 1)
            #expect(try await listed() == [.pending])
            // However old, a pending event stays: it has not reached the endpoint yet.
            #expect(try await store.pruneWebhookDeliveries(before: Timestamp(milliseconds: .max), limit: 10) == 0)
            #expect(try await store.pendingWebhookDeliveries() == 1)
        }
    }

    @Test("parked deliveries come due as runs of each queue's due prefix; each outcome is recorded under the stream's lease only", arguments: backends)
    func outcomes(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            try await send(6, in: store)
            let stream = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 1, until: 2, held: nil))
            let events = try await store.webhookEvents(after: stream.cursor, limit: 10, maxBytes: 1 << 20)
            try #require(events.count == 6)
            #expect(try await store.dueWebhookDeliveries(of: endpoint.id, now: 10_000, limit: 10, runLength: 6).next == nil)
            _ = try await store.advanceWebhookStream(
                of: endpoint.id, lease: 2, to: events[5].cursor,
                parking: events.map { WebhookParking(event: $0, nextAttemptAt: 5000) }, attempts: [], answeredAt: nil,
                leaseAfter: 0
            )
            // Not due yet: no run, and when to look again.
            let early = try await store.dueWebhookDeliveries(of: endpoint.id, now: 4000, limit: 10, runLength: 6)
            #expect(early.runs.isEmpty && early.next == 5000)
            let due = try await store.dueWebhookDeliveries(of: endpoint.id, now: 10_000, limit: 10, runLength: 6)
            #expect(due.runs.map { $0.map(\.position) } == [events.map(\.position)])
            #expect(due.next == nil)
            let seqs = try #require(due.runs.first).map(\.seq)
            try #require(seqs.count == 6)
            let lease = Timestamp(milliseconds: 20_000)
            let attempts = [
                WebhookAttempt(seq: seqs[0], outcome: .delivered, status: 204, error: nil, at: 11_000),
                WebhookAttempt(seq: seqs[1], outcome: .retry(at: 15_000), status: 503, error: "busy", at: 11_100),
                WebhookAttempt(seq: seqs[2], outcome: .failed, status: nil, error: "refused", at: 11_200),
                WebhookAttempt(seq: seqs[4], outcome: .deferred(until: 30_000), status: nil, error: nil, at: 11_400),
            ]
            // A node whose lease another took over records nothing.
            let held = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_000, until: lease, held: nil))
            #expect(try await !store.advanceWebhookStream(
                of: endpoint.id, lease: 19_999, to: held.cursor, parking: [], attempts: attempts, answeredAt: nil, leaseAfter: 0))
            #expect(try await store.webhookDeliveries(of: endpoint.id, state: .pending, before: nil, limit: 10).count == 6)
            #expect(try await store.advanceWebhookStream(
                of: endpoint.id, lease: lease, to: held.cursor, parking: [], attempts: attempts, answeredAt: nil, leaseAfter: 0))
            let listed = try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10)
            let bySeq = Dictionary(uniqueKeysWithValues: listed.map { ($0.seq, $0) })
            struct Seen: Equatable {
                let state: WebhookDelivery.State
                let attempts: Int
                let next: Int64
                let status: Int?
                let error: String?
                let delivered: Int64?
            }
            func seen(_ index: Int) -> Seen? {
                bySeq[seqs[index]].map {
                    Seen(state: $0.state, attempts: $0.attempts, next: $0.nextAttemptAt.rawValue, status: $0.lastStatus,
                         error: $0.lastError, delivered: $0.deliveredAt?.rawValue)
                }
            }
            #expect(seen(0) == Seen(state: .delivered, attempts: 1, next: 5000, status: 204, error: nil, delivered: 11_000))
            #expect(seen(1) == Seen(state: .pending, attempts: 1, next: 15_000, status: 503, error: "busy", delivered: nil))
            #expect(seen(2) == Seen(state: .failed, attempts: 1, next: 5000, status: nil, error: "refused", delivered: nil))
            // Not attempted: untouched; not attempted on purpose: only its next attempt moved.
            #expect(seen(3) == Seen(state: .pending, attempts: 0, next: 5000, status: nil, error: nil, delivered: nil))
            #expect(seen(4) == Seen(state: .pending, attempts: 0, next: 30_000, status: nil, error: nil, delivered: nil))
            #expect(seen(5) == Seen(state: .pending, attempts: 0, next: 5000, status: nil, error: nil, delivered: nil))
            // The queue's head now waits out its backoff, and holds the rest back; once due, the run is the due prefix
            // behind it, up to the deferred one.
            let waiting = try await store.dueWebhookDeliveries(of: endpoint.id, now: 12_000, limit: 10, runLength: 6)
            #expect(waiting.runs.isEmpty && waiting.next == 15_000)
            let prefix = try await store.dueWebhookDeliveries(of: endpoint.id, now: 16_000, limit: 10, runLength: 6)
            #expect(prefix.runs.map { $0.map(\.seq) } == [[seqs[1], seqs[3]]])
            #expect(prefix.next == nil)
            // A success makes the deliveries waiting out a backoff due then (not one deferred on purpose); an outcome
            // recorded with it keeps its own time.
            let again = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 10_001, until: 21_000, held: nil))
            #expect(try await store.advanceWebhookStream(
                of: endpoint.id, lease: 21_000, to: again.cursor, parking: [],
                attempts: [WebhookAttempt(seq: seqs[3], outcome: .retry(at: 40_000), status: 500, error: nil, at: 12_500)],
                answeredAt: 12_000, leaseAfter: 0))
            let after = Dictionary(
                uniqueKeysWithValues: try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10)
                    .map { ($0.seq, $0.nextAttemptAt.rawValue) }
            )
            #expect(after[seqs[1]] == 12_000)
            #expect(after[seqs[4]] == 30_000)
            #expect(after[seqs[3]] == 40_000)
        }
    }

    @Test("an endpoint deleted while messages are being sent leaves none of its deliveries behind", arguments: backends)
    func deletedWhileSending(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let accounts = (0..<8).map { AccountID(rawValue: "u\($0)") }
            for account in accounts { try await store.registerAccount(account, at: 0) }
            // Rounds of 24 sends in 8 conversations racing the endpoint's deletion: a send that recorded its
            // delivery while the deletion was under way must not leave it pending for an endpoint that is gone.
            for round in 0..<12 {
                let endpoint = WebhookEndpoint(
                    id: "whep_\(round)", url: "http://127.0.0.1:9/", events: nil, secret: "whsec_x", createdAt: 0
                )
                try await store.createWebhookEndpoint(endpoint)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<24 {
                        group.addTask {
                            let (sender, recipient) = (accounts[index % 8], accounts[(index + 1) % 8])
                            let id = "r\(round)-\(index)"
                            _ = try await store.append(
                                MessageDraft(
                                    id: MessageID(rawValue: id), conversation: .direct(sender, recipient),
                                    clientID: ClientMessageID(rawValue: id), sender: sender,
                                    time: Timestamp(milliseconds: 1000), body: "hi"
                                )
                            )
                        }
                        if index == 8 {
                            group.addTask {
                                let deleted = try await store.deleteWebhookEndpoint(endpoint.id)
                                #expect(deleted)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(try await store.pendingWebhookDeliveries() == 0, "round \(round)")
            }
        }
    }
}
