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

    @Test("pruning deletes finished deliveries past the cutoff, a batch at a time, and never a pending one", arguments: backends)
    func pruning(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account: AccountID in ["alice", "bob"] { try await store.registerAccount(account, at: 0) }
            let endpoint = WebhookEndpoint(id: "whep_1", url: "http://127.0.0.1:9/", events: nil, secret: "whsec_x", createdAt: 0)
            try await store.createWebhookEndpoint(endpoint)
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
}
