// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import NIOHTTP1

/// Parked deliveries (ADR 0030 decision 4): claimed in runs, one per endpoint and conversation, delivered in order.
extension WebhookDispatcher {
    /// A claimed run stays leased this long: two attempts with their timeouts and a margin. A run starts no attempt
    /// that could outlive the lease (the rest is released), and a node that died mid-run leaves its queue to the
    /// others after it.
    var leaseMilliseconds: Int64 { 2 * attemptMilliseconds + 5000 }

    var attemptMilliseconds: Int64 { Int64(WebhookRetryPolicy.seconds(settings.attemptTimeout) * 1000) }

    /// Claimed deliveries as runs: one per endpoint and conversation, in `seq` order.
    static func runs(of claimed: [WebhookDelivery]) -> [[WebhookDelivery]] {
        var order: [String] = []
        var runs: [String: [WebhookDelivery]] = [:]
        for delivery in claimed.sorted(by: { $0.seq < $1.seq }) {
            let key = delivery.endpointID + "\u{0}" + delivery.conversation.rawValue
            if runs[key] == nil { order.append(key) }
            runs[key, default: []].append(delivery)
        }
        return order.map { runs[$0]! }
    }

    /// Delivers a run in order, one attempt at a time on one connection, until one is not accepted (it is retried
    /// later and the rest wait behind it) or the next could outlive the lease; then records every outcome in one
    /// write. One deadline bounds the whole run, answers' bodies included: it ends 5 s before the lease does.
    func deliver(_ run: [WebhookDelivery], to endpoint: WebhookEndpoint, lease: Timestamp) async {
        let deadline = lease.rawValue - 5000
        // One deadline bounds the run, answers included: it cancels the attempt under way (which counts as failed
        // and is retried).
        let attempts: [WebhookAttempt] = await untilDeadline(deadline, now: now) { () -> [WebhookAttempt] in
            var outcomes: [WebhookAttempt] = []
            for delivery in run {
                if outcomes.last.map({ $0.outcome != .delivered }) ?? false
                    || self.now().rawValue + self.attemptMilliseconds > deadline || Task.isCancelled
                {
                    break
                }
                if delivery.type == .messageUndelivered {
                    let outcome = await self.undelivered(delivery, to: endpoint, lease: lease)
                    outcomes.append(outcome)
                    if case .deferred = outcome.outcome { break }
                } else {
                    outcomes.append(await self.attempt(delivery, to: endpoint, lease: lease))
                }
            }
            return outcomes
        } ?? []
        // What the run did not attempt (a deferral ends it too) is free again, its attempts unchanged.
        let released = run.dropFirst(attempts.count).map {
            WebhookAttempt(seq: $0.seq, lease: lease, outcome: .released, status: nil, error: nil, at: now())
        }
        do {
            try await store.recordWebhookAttempts(attempts + released)
        } catch {
            // The lease runs out and the run is attempted again: at least once, never lost.
            logger.warning("Webhook attempts could not be recorded", metadata: ["error": "\(error)"])
        }
    }

    /// One POST of `delivery`, signed with the endpoint's secrets; its outcome (not yet recorded).
    func attempt(
        _ delivery: WebhookDelivery,
        payload: String? = nil,
        to endpoint: WebhookEndpoint,
        lease: Timestamp
    ) async -> WebhookAttempt {
        guard let (origin, request) = requests([[(delivery, payload)]], to: endpoint).map({ ($0.origin, $0.requests[0]) }) else {
            return attempt(delivery, to: endpoint.id, answered: .failed("The endpoint's URL is not an http or https URL."), lease: lease)
        }
        // The caller decided that it starts; its run's deadline (5 s before the lease) bounds it, as the attempt
        // timeout does.
        let deadline = NIODeadline.now() + .milliseconds(max(0, lease.rawValue - 5000 - now().rawValue))
        let answer = await http.send([[request]], to: origin, parallel: 1, deadline: deadline, mayDefer: false).first?.first
        return attempt(delivery, to: endpoint.id, answered: answer ?? .failed(AttemptTimedOut().description), lease: lease)
    }

    /// The requests of `groups` to `endpoint`, one per group (each delivery with its payload, when not the stored
    /// one), signed now with its secrets (decoded once); `nil` when its URL is not one Courier posts to. The body of a
    /// request is its event, or, when the endpoint takes batches, a JSON array of its group's events, each with its
    /// `id` (``batchBody(_:)``).
    func requests(
        _ groups: [[(delivery: WebhookDelivery, payload: String?)]],
        to endpoint: WebhookEndpoint
    ) -> (origin: WebhookHTTP.Origin, requests: [WebhookRequest])? {
        guard let url = URL(string: endpoint.url), let (origin, path, host) = WebhookHTTP.target(of: url) else { return nil }
        let sentAt = now()
        let timestamp = sentAt.rawValue / 1000
        let keys = WebhookSigner.keys(endpoint.signingSecrets(at: sentAt))
        return (
            origin,
            groups.map { group in
                let first = group[0].delivery
                let body: String
                let id: String
                if endpoint.batch > 0 {
                    body = Self.batchBody(group.map { ($0.delivery.eventID, $0.payload ?? $0.delivery.payload) })
                    id = Self.batchID(first: first.eventID, count: group.count)
                } else {
                    body = group[0].payload ?? first.payload
                    id = first.eventID
                }
                var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
                head.headers.add(name: "Host", value: host)
                head.headers.add(name: "Content-Type", value: "application/json")
                head.headers.add(name: "Content-Length", value: String(body.utf8.count))
                head.headers.add(name: "User-Agent", value: "Courier-Webhooks/1")
                head.headers.add(name: "webhook-id", value: id)
                head.headers.add(name: "webhook-timestamp", value: String(timestamp))
                head.headers.add(
                    name: "webhook-signature",
                    value: WebhookSigner.signature(keys: keys, id: id, timestamp: timestamp, body: body)
                )
                let expiresAt = first.expiresAt ?? settings.retry.expiry(from: first.createdAt)
                return WebhookRequest(
                    head: head,
                    body: ByteBuffer(string: body),
                    // With the shortest backoff: a refusal ends the queue whenever the outcome (its backoff drawn
                    // later, with jitter, at a later time) could be a retry.
                    endsQueueIfRefused: settings.retry.nextAttempt(
                        after: first.attempts + 1, now: sentAt, expiresAt: expiresAt, random: 0.5
                    ) != nil
                )
            }
        )
    }

    /// A batch's body: a JSON array of its events in order, each the object it is sent as alone with its event id
    /// added first (`{"id":"…","data":…}`), so that a receiver de-duplicates each event as it would alone.
    static func batchBody(_ events: [(id: String, payload: String)]) -> String {
        var body = "["
        for (index, event) in events.enumerated() {
            if index > 0 { body += "," }
            // A stored payload is a JSON object with keys (`{"data":…}`): the id goes in front of them. Event ids are
            // the server's own (`evt_` and hex digits, ``WebhookEvents``): nothing in them needs escaping.
            body += "{\"id\":\"" + event.id + "\"," + event.payload.dropFirst()
        }
        return body + "]"
    }

    /// A batch's `webhook-id`: its first event's id, and `+` and the number of events after it when there are any
    /// (the same events in the same batch, sent again, have the same one).
    static func batchID(first: String, count: Int) -> String {
        count == 1 ? first : "\(first)+\(count - 1)"
    }

    /// The outcome of `delivery`'s attempt to `endpoint` that got `answer` (not yet recorded), with its metric and,
    /// when it failed, its log line.
    func attempt(
        _ delivery: WebhookDelivery,
        to endpoint: String,
        answered answer: WebhookAnswer,
        lease: Timestamp
    ) -> WebhookAttempt {
        let finished = now()
        var status: Int?
        var failure: String?
        switch answer {
        case .status(let code): status = code
        case .failed(let reason): failure = reason
        }
        let result: WebhookAttempt.Outcome
        if answer.isAccepted {
            result = .delivered
            metrics.webhookDelivered(delivery.type.rawValue, lagMilliseconds: finished.rawValue - delivery.createdAt.rawValue)
        } else {
            let expiresAt = delivery.expiresAt ?? settings.retry.expiry(from: delivery.createdAt)
            result = settings.retry.nextAttempt(after: delivery.attempts + 1, now: finished, expiresAt: expiresAt)
                .map { .retry(at: $0) } ?? .failed
            metrics.webhookFailedAttempt(delivery.type.rawValue, final: result == .failed)
            logFailure(delivery, to: endpoint, status: status, error: failure, final: result == .failed, at: finished)
        }
        return WebhookAttempt(
            seq: delivery.seq,
            lease: lease,
            outcome: result,
            status: status,
            error: result == .delivered ? nil : failure ?? status.map { "The endpoint answered \($0)." },
            at: finished
        )
    }
}
