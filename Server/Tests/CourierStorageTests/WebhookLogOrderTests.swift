// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierTestSupport
import CourierWire
import Foundation
import Logging
import Testing

/// ADR 0030 on PostgreSQL, where transactions commit in another order than they took their positions: an endpoint's
/// cursor never passes an event whose transaction is still running, so an event that commits late is read, in its
/// place, and never skipped.
@Suite("Storage contract: the webhook log on PostgreSQL", .timeLimit(.minutes(5)))
struct WebhookLogOrderTests {
    func draft(_ body: String, to conversation: ConversationID) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: "m-\(body)"), conversation: conversation, clientID: ClientMessageID(rawValue: body),
            sender: "alice", time: 1, body: body
        )
    }

    @Test(
        "an event whose transaction commits after a later one's is read in its place; the cursor never passes it",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func lateCommitIsNotSkipped() async throws {
        try await StorageBackend.withPostgresStore { store, url in
            for account in ["alice", "bob", "carol"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let endpoint = WebhookEndpoint(id: "whep_1", url: "http://127.0.0.1:9/", events: nil, secret: "whsec_x", createdAt: 0)
            try await store.createWebhookEndpoint(endpoint)
            let late = ConversationID.direct("alice", "bob")
            let other = ConversationID.direct("alice", "carol")
            _ = try await store.append(draft("early", to: late))
            let start = try #require(try await store.leaseWebhookStream(of: endpoint.id, now: 1, until: 2, held: nil)).cursor

            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // The append of "late" stops after it wrote its rows (its event among them): it commits when the test
                // says.
                let appending = try await session.holdingAppends(withBody: "late", key: 4243) {
                    try await store.append(draft("late", to: late))
                }

                // A later transaction commits meanwhile: the log is read only up to the one still running, so the
                // endpoint gets "early" and waits.
                _ = try await store.append(draft("other", to: other))
                let first = try await store.webhookEvents(after: start, limit: 10, maxBytes: 1 << 20)
                #expect(first.map(\.payload).map(Self.body) == ["early"])
                let cursor = try #require(first.last).cursor

                // The late one commits: read from the cursor, both come, the late one first (its transaction began
                // first).
                try await session.release(4243)
                _ = try await appending.value
                let next = try await store.webhookEvents(after: cursor, limit: 10, maxBytes: 1 << 20)
                #expect(next.map(\.payload).map(Self.body) == ["late", "other"])
            }
        }
    }

    /// The message body an event's payload carries.
    static func body(_ payload: String) -> String {
        struct Event: Decodable {
            struct Data: Decodable { let message: WireMessage }
            let data: Data
        }
        return (try? JSONDecoder().decode(Event.self, from: Foundation.Data(payload.utf8)).data.message.body) ?? payload
    }
}
