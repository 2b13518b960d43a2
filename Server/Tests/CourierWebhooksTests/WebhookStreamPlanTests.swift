// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierWire
import Testing

@testable import CourierWebhooks
@testable import CourierServerCore

/// What an endpoint's stream does with a batch before any request (ADR 0030), without I/O.
@Suite("Webhook stream plan")
struct WebhookStreamPlanTests {
    static func event(_ position: Int64, _ conversation: String, _ type: WebhookEventType = .messageCreated) -> WebhookEvent {
        WebhookEvent(
            position: position, stamp: 1, id: "evt_\(position)", type: type,
            conversation: ConversationID(rawValue: conversation), createdAt: Timestamp(milliseconds: 1000 + position),
            payload: "{}"
        )
    }

    @Test("one queue per conversation in log order; a parked conversation's events wait behind it; pushes wait for their moment")
    func plan() {
        let events = [
            Self.event(1, "d:a:b"), Self.event(2, "g:team"), Self.event(3, "d:a:b"),
            Self.event(4, "push:d:a:b", .messageUndelivered), Self.event(5, "d:a:c"), Self.event(6, "g:team"),
        ]
        let plan = WebhookDispatcher.streamPlan(events, parked: ["d:a:c"], now: 50_000, pushDelay: 2000)
        #expect(plan.queues.map { $0.map(\.position) } == [[1, 3], [2, 6]])
        #expect(plan.parking.map(\.event.position) == [4, 5])
        // The push is due its delay after its event; what waits behind a parked delivery is due now, unattempted.
        #expect(plan.parking.map(\.nextAttemptAt.rawValue) == [1004 + 2000, 50_000])
        #expect(plan.parking.allSatisfy { $0.attempts == 0 && $0.state == .pending })
    }

    static func delivery(_ seq: Int64, _ type: WebhookEventType = .messageCreated, bytes: Int = 2) -> WebhookDelivery {
        WebhookDelivery(
            seq: seq, position: seq, endpointID: "e", eventID: "evt_\(seq)", type: type,
            conversation: ConversationID(rawValue: "d:a:b"), createdAt: Timestamp(milliseconds: seq),
            payload: String(repeating: "x", count: bytes), state: .pending, attempts: 1,
            nextAttemptAt: Timestamp(milliseconds: 0), expiresAt: nil, lastStatus: nil, lastError: nil, deliveredAt: nil
        )
    }

    @Test("a retry run goes out in the endpoint's batches: at most its size, up to a push, within the batch's bytes")
    func retryBatches() {
        let run = (1...7).map { Self.delivery($0) }[...]
        #expect(WebhookDispatcher.retryBatch(run, size: 5).map(\.seq) == [1, 2, 3, 4, 5])
        #expect(WebhookDispatcher.retryBatch(run.dropFirst(5), size: 5).map(\.seq) == [6, 7])
        // No batch: one a request.
        #expect(WebhookDispatcher.retryBatch(run, size: 0).map(\.seq) == [1])
        // A push's payload is made when it is sent: the batch stops before it.
        let pushed = [Self.delivery(1), Self.delivery(2, .messageUndelivered), Self.delivery(3)][...]
        #expect(WebhookDispatcher.retryBatch(pushed, size: 5).map(\.seq) == [1])
        // Within the stream's bytes for a batch; the first goes whatever its size.
        let half = WebhookDispatcher.streamBatchBytes / 2
        let large = [Self.delivery(1, bytes: half), Self.delivery(2, bytes: half), Self.delivery(3)][...]
        #expect(WebhookDispatcher.retryBatch(large, size: 5).map(\.seq) == [1, 2])
        let huge = [Self.delivery(1, bytes: 2 * WebhookDispatcher.streamBatchBytes), Self.delivery(2)][...]
        #expect(WebhookDispatcher.retryBatch(huge, size: 5).map(\.seq) == [1])
    }

    @Test("an endpoint's filter: every type but message.undelivered for all, else the types it names")
    func filter() {
        let all = WebhookEndpoint(id: "e", url: "http://x", events: nil, secret: "s", createdAt: 0)
        #expect(all.wants(.messageCreated) && all.wants(.groupChanged) && !all.wants(.messageUndelivered))
        let named = WebhookEndpoint(id: "e", url: "http://x", events: [.messageUndelivered], secret: "s", createdAt: 0)
        #expect(named.wants(.messageUndelivered) && !named.wants(.messageCreated))
    }
}
