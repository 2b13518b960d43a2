// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import CourierServerCore

extension WebhookDispatcher {
    /// The message a `message.undelivered` event is about, as stored with it.
    private struct UndeliveredData: Decodable {
        let message: WireMessage
    }

    /// A `message.undelivered` event: once its message is `pushDelay` old, the recipients who still have it on no
    /// device, with their push tokens; none, and there is nothing to send (it is done without a request).
    func undelivered(_ delivery: WebhookDelivery, to endpoint: WebhookEndpoint, deadline: Int64) async -> WebhookAttempt {
        let time = now()
        // Settled here, without a request.
        func settled(_ outcome: WebhookAttempt.Outcome, error: String? = nil) -> WebhookAttempt {
            WebhookAttempt(seq: delivery.seq, outcome: outcome, status: nil, error: error, at: time)
        }
        let due = Timestamp(milliseconds: delivery.createdAt.rawValue + Int64(WebhookRetryPolicy.seconds(settings.pushDelay) * 1000))
        guard due <= time else { return settled(.deferred(until: due)) }
        guard let message = try? JSONDecoder().decode(UndeliveredData.self, from: Data(delivery.payload.utf8)).message else {
            return settled(.failed, error: "Unreadable event.")
        }
        // Recalled meanwhile: its body is not pushed (the recall's own event tells whoever lacks it).
        if message.isChatMessage, (try? await store.message(message.id))?.isRecalled == true {
            return settled(.delivered)
        }
        let limit = max(1, settings.pushRecipientsPerEvent)
        let recipients: [PushRecipient]
        do {
            recipients = try await store.undeliveredRecipients(
                in: message.conversation,
                seq: message.seq,
                excluding: WebhookEvents.pushExclusions(for: message),
                after: nil,
                limit: limit + 1
            )
        } catch {
            // Try again later, like a failed attempt (the store was unavailable).
            let retry = Timestamp(milliseconds: time.rawValue + 5000)
            return settled(.retry(at: retry), error: "Recipients could not be read: \(error)")
        }
        guard !recipients.isEmpty else { return settled(.delivered) }
        let shown = Array(recipients.prefix(limit))
        let payload = WebhookEvents.undeliveredPayload(
            stored: delivery.payload,
            createdAt: delivery.createdAt,
            recipients: shown,
            nextCursor: recipients.count > limit ? shown.last?.account : nil
        )
        return await attempt([(delivery, payload)], to: endpoint, deadline: deadline)[0]
    }
}
