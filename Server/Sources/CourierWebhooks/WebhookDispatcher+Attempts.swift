// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import NIOCore
internal import NIOHTTP1
internal import CourierServerCore

/// Attempts: the signed requests of a batch or of a parked run, and what each answer comes to.
extension WebhookDispatcher {
    /// An endpoint's stream stays leased this long after each write: two attempts with their timeouts and a margin.
    /// A stream starts no attempt that could outlive its lease (what is left waits for its next cycle), and a node
    /// that died mid-cycle leaves the endpoint to the others after it.
    var leaseMilliseconds: Int64 { 2 * attemptMilliseconds + 5000 }

    var attemptMilliseconds: Int64 { Int64(WebhookRetryPolicy.seconds(settings.attemptTimeout) * 1000) }

    var pollMilliseconds: Int64 { Int64(WebhookRetryPolicy.seconds(settings.pollInterval) * 1000) }

    /// Delivers a parked run in order, one request at a time on one connection, until one is not accepted (it is
    /// retried later and the rest wait behind it) or the next could outlive `deadline` (they wait, untouched): the
    /// outcomes, to be recorded with the stream's next write. A request carries one delivery, or, when the endpoint
    /// takes batches, the next ones of the run as a batch (``retryBatch(_:size:)``), as the stream sends the log. The
    /// deadline bounds the whole run, answers included: it cancels the request under way (its deliveries count as
    /// failed and are retried; the outcome is not recorded).
    func deliver(_ run: [WebhookDelivery], to endpoint: WebhookEndpoint, deadline: Int64) async -> [WebhookAttempt] {
        await untilDeadline(deadline, now: now) { () -> [WebhookAttempt] in
            var outcomes: [WebhookAttempt] = []
            var rest = run[...]
            while let delivery = rest.first {
                if outcomes.last.map({ $0.outcome != .delivered }) ?? false
                    || self.now().rawValue + self.attemptMilliseconds > deadline || Task.isCancelled
                {
                    break
                }
                if delivery.type == .messageUndelivered {
                    rest.removeFirst()
                    let outcome = await self.undelivered(delivery, to: endpoint, deadline: deadline)
                    outcomes.append(outcome)
                    if case .deferred = outcome.outcome { break }
                } else {
                    let batch = Self.retryBatch(rest, size: endpoint.batch)
                    rest.removeFirst(batch.count)
                    outcomes += await self.attempt(batch.map { ($0, nil) }, to: endpoint, deadline: deadline)
                }
            }
            return outcomes
        } ?? []
    }

    /// The deliveries at the head of a run that go out in one request: at most `size` (the endpoint's `batch`; 0 is
    /// one), up to
    /// the first `message.undelivered` (whose payload is made when it is sent), and no more than the stream's bytes
    /// for a batch (the first one whatever its size).
    static func retryBatch(_ run: ArraySlice<WebhookDelivery>, size: Int) -> ArraySlice<WebhookDelivery> {
        var (end, bytes) = (run.startIndex, 0)
        for delivery in run.prefix(max(1, size)) {
            bytes += delivery.payload.utf8.count
            guard delivery.type != .messageUndelivered, end == run.startIndex || bytes <= streamBatchBytes else { break }
            end += 1
        }
        return run[..<end]
    }

    /// One POST of `deliveries` (one event, or a batch where the endpoint takes them), each with its payload when not
    /// the stored one, signed with the endpoint's secrets: each delivery's outcome (not yet recorded).
    func attempt(
        _ deliveries: [(delivery: WebhookDelivery, payload: String?)],
        to endpoint: WebhookEndpoint,
        deadline: Int64
    ) async -> [WebhookAttempt] {
        let answer: WebhookAnswer
        if let (origin, requests) = requests([deliveries], to: endpoint) {
            // The caller decided that it starts; its run's deadline (5 s before the lease) bounds it, as the attempt
            // timeout does.
            answer = await http.send(
                [requests],
                to: origin,
                parallel: 1,
                deadline: NIODeadline.now() + .milliseconds(max(0, deadline - now().rawValue)),
                mayDefer: false
            ).first?.first ?? .failed(AttemptTimedOut().description)
        } else {
            answer = .failed("The endpoint's URL is not an http or https URL.")
        }
        // A batch's answer, its time and its backoff's jitter are each of its events'.
        let (finished, jitter) = (now(), WebhookRetryPolicy.jitter())
        return deliveries.map { attempt($0.delivery, to: endpoint.id, answered: answer, at: finished, jitter: jitter) }
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
                return WebhookRequest(
                    head: head,
                    body: ByteBuffer(string: body),
                    // With the shortest backoff: a refusal ends the queue whenever the outcome of any of its events
                    // (its backoff drawn later, with jitter, at a later time) could be a retry. Not only the first's:
                    // in a batch that straddles the retry period, the oldest fails for good while a younger one is
                    // retried, and nothing after it may go ahead.
                    endsQueueIfRefused: group.contains { nextAttempt(of: $0.delivery, at: sentAt, random: 0.5) != nil }
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

    /// When `delivery` goes again if its attempt at `now` is not accepted; `nil` once its retry period is over.
    func nextAttempt(of delivery: WebhookDelivery, at now: Timestamp, random: Double) -> Timestamp? {
        let expiresAt = delivery.expiresAt ?? settings.retry.expiry(from: delivery.createdAt)
        return settings.retry.nextAttempt(after: delivery.attempts + 1, now: now, expiresAt: expiresAt, random: random)
    }

    /// The outcome of `delivery`'s attempt to `endpoint` that got `answer` at `finished` (not yet recorded), with its
    /// metric and, when it failed, its log line. Not accepted, it is due again after its backoff times `jitter`: the
    /// events of one request share it, so that those with as many attempts come due together, and go again together.
    func attempt(
        _ delivery: WebhookDelivery,
        to endpoint: String,
        answered answer: WebhookAnswer,
        at finished: Timestamp,
        jitter: Double
    ) -> WebhookAttempt {
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
            result = nextAttempt(of: delivery, at: finished, random: jitter).map { .retry(at: $0) } ?? .failed
            metrics.webhookFailedAttempt(delivery.type.rawValue, final: result == .failed)
            logFailure(delivery, to: endpoint, status: status, error: failure, final: result == .failed, at: finished)
        }
        return WebhookAttempt(
            seq: delivery.seq,
            outcome: result,
            status: status,
            error: result == .delivered ? nil : failure ?? status.map { "The endpoint answered \($0)." },
            at: finished
        )
    }
}
