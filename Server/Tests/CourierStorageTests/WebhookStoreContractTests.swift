// Courier — Apache-2.0
import CourierStorage
import CourierTestSupport
import CourierWire
import Testing

/// The webhook outbox's bookkeeping, on every backend.
@Suite("Storage contract: webhook deliveries", .timeLimit(.minutes(3)))
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

    @Test("pruning deletes finished deliveries past the cutoff, a batch at a time, and never a pending one", arguments: backends)
    func pruning(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            for (index, time) in [1000, 2000, 3000].enumerated() {
                _ = try await store.append(
                    MessageDraft(
                        id: MessageID(rawValue: "m-\(index)"), conversation: conversation,
                        clientID: ClientMessageID(rawValue: "m-\(index)"), sender: "alice",
                        time: Timestamp(milliseconds: Int64(time)), body: "hi"
                    )
                )
            }
            let lease = Timestamp(milliseconds: 20_000)
            let claimed = try await store.claimWebhookDeliveries(
                now: 10_000, leaseUntil: lease, limit: 10, runLength: 3, slots: WebhookSlots(perEndpoint: 10)
            )
            #expect(claimed.map(\.type) == [.messageCreated, .messageCreated, .messageCreated])
            guard claimed.count == 3 else { return }
            try await store.recordWebhookAttempts([
                WebhookAttempt(seq: claimed[0].seq, lease: lease, outcome: .delivered, status: 204, error: nil, at: 5000),
                WebhookAttempt(seq: claimed[1].seq, lease: lease, outcome: .failed, status: 500, error: "down", at: 6000),
                WebhookAttempt(seq: claimed[2].seq, lease: lease, outcome: .released, status: nil, error: nil, at: 6000),
            ])
            func listed() async throws -> [WebhookDelivery.State] {
                try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10).map(\.state)
            }
            #expect(try await listed() == [.pending, .failed, .delivered])

            // Nothing finished before the cutoff: nothing goes (the delivered one finished at 5000, the failed one's
            // last attempt was due at 2000).
            #expect(try await store.pruneWebhookDeliveries(before: 2000, limit: 10) == 0)
            // A batch of one takes one; the next batch the other.
            #expect(try await store.pruneWebhookDeliveries(before: 5001, limit: 1) == 1)
            #expect(try await store.pruneWebhookDeliveries(before: 5001, limit: 10) == 1)
            #expect(try await listed() == [.pending])
            // However old, a pending delivery stays: it has not reached the endpoint yet.
            #expect(try await store.pruneWebhookDeliveries(before: Timestamp(milliseconds: .max), limit: 10) == 0)
            #expect(try await store.pendingWebhookDeliveries() == 1)
        }
    }

    @Test("each outcome of a run leaves its delivery as documented; an attempt under a stale lease changes nothing", arguments: backends)
    func outcomes(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let endpoint = try await Self.prepare(store)
            for index in 0..<6 {
                _ = try await store.append(
                    MessageDraft(
                        id: MessageID(rawValue: "m-\(index)"), conversation: conversation,
                        clientID: ClientMessageID(rawValue: "m-\(index)"), sender: "alice",
                        time: Timestamp(milliseconds: Int64(1000 + index)), body: "hi"
                    )
                )
            }
            let lease = Timestamp(milliseconds: 20_000)
            let claimed = try await store.claimWebhookDeliveries(
                now: 10_000, leaseUntil: lease, limit: 10, runLength: 6, slots: WebhookSlots(perEndpoint: 10)
            )
            #expect(claimed.count == 6)
            guard claimed.count == 6 else { return }
            let seqs = claimed.map(\.seq)
            try await store.recordWebhookAttempts([
                WebhookAttempt(seq: seqs[0], lease: lease, outcome: .delivered, status: 204, error: nil, at: 11_000),
                WebhookAttempt(seq: seqs[1], lease: lease, outcome: .retry(at: 15_000), status: 503, error: "busy", at: 11_100),
                WebhookAttempt(seq: seqs[2], lease: lease, outcome: .failed, status: nil, error: "refused", at: 11_200),
                WebhookAttempt(seq: seqs[3], lease: lease, outcome: .released, status: nil, error: nil, at: 11_300),
                WebhookAttempt(seq: seqs[4], lease: lease, outcome: .deferred(until: 30_000), status: nil, error: nil, at: 11_400),
                // Another node's lease, or one that ran out and was taken again: not this run's to record.
                WebhookAttempt(seq: seqs[5], lease: 19_999, outcome: .delivered, status: 200, error: nil, at: 11_500),
            ])
            let listed = try await store.webhookDeliveries(of: endpoint.id, state: nil, before: nil, limit: 10)
            let bySeq = Dictionary(uniqueKeysWithValues: listed.map { ($0.seq, $0) })
            func row(_ index: Int) -> WebhookDelivery? { bySeq[seqs[index]] }
            struct Seen: Equatable {
                let state: WebhookDelivery.State
                let attempts: Int
                let next: Int64
                let status: Int?
                let error: String?
                let delivered: Int64?
            }
            func seen(_ index: Int) -> Seen? {
                row(index).map {
                    Seen(state: $0.state, attempts: $0.attempts, next: $0.nextAttemptAt.rawValue, status: $0.lastStatus,
                         error: $0.lastError, delivered: $0.deliveredAt?.rawValue)
                }
            }
            let created = claimed.map(\.nextAttemptAt.rawValue)
            #expect(seen(0) == Seen(state: .delivered, attempts: 1, next: created[0], status: 204, error: nil, delivered: 11_000))
            #expect(seen(1) == Seen(state: .pending, attempts: 1, next: 15_000, status: 503, error: "busy", delivered: nil))
            #expect(seen(2) == Seen(state: .failed, attempts: 1, next: created[2], status: nil, error: "refused", delivered: nil))
            #expect(seen(3) == Seen(state: .pending, attempts: 0, next: created[3], status: nil, error: nil, delivered: nil))
            #expect(seen(4) == Seen(state: .pending, attempts: 0, next: 30_000, status: nil, error: nil, delivered: nil))
            #expect(seen(5) == Seen(state: .pending, attempts: 0, next: created[5], status: nil, error: nil, delivered: nil))
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
