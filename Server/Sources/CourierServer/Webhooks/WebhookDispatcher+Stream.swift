// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Logging
internal import Synchronization

/// Each endpoint reads the event log from its cursor (ADR 0030): a batch at a time, its conversations side by side and
/// each conversation's events in order; what it could not deliver at once is parked as a delivery of its own, with
/// the rest of its conversation behind it, and the cursor moves past the batch in the same write.
extension WebhookDispatcher {
    /// Events read from the log at a time, per endpoint: what a crash sends again at most (a batch is handed over
    /// as a whole).
    static let streamBatch = 64

    private enum StreamFinished: Sendable {
        case batch(endpoint: String, more: Bool)
        case tick
    }

    /// Hands every endpoint's new events over, each endpoint on its own (one batch at a time each, so a slow endpoint
    /// holds back only itself): again at once after a full batch, else at a nudge or the poll interval.
    func streams() async {
        await withTaskGroup(of: StreamFinished.self) { group in
            var endpoints: [String] = []
            var loaded: Int64 = 0
            var busy: Set<String> = []
            // Endpoints to read again as soon as their batch under way (if any) is done.
            var due: Set<String> = []
            var ticking = false
            let pollMilliseconds = Int64(WebhookRetryPolicy.seconds(settings.pollInterval) * 1000)
            while !Task.isCancelled {
                let time = now()
                if time.rawValue - loaded >= pollMilliseconds
                    || streamEndpointsChanged.exchange(false, ordering: .relaxed)
                {
                    loaded = time.rawValue
                    if let all = try? await store.webhookEndpoints() {
                        endpoints = all.map(\.id)
                        due.formUnion(endpoints)
                    }
                }
                for endpoint in endpoints where due.contains(endpoint) && !busy.contains(endpoint) {
                    due.remove(endpoint)
                    busy.insert(endpoint)
                    group.addTask { .batch(endpoint: endpoint, more: await self.stream(endpoint)) }
                }
                if !ticking {
                    ticking = true
                    let interval = settings.pollInterval
                    let wakeup = streamWakeup
                    group.addTask {
                        await withTaskGroup(of: Void.self) { waits in
                            waits.addTask { await wakeup.wait() }
                            waits.addTask { try? await Task.sleep(for: interval) }
                            await waits.next()
                            waits.cancelAll()
                        }
                        return .tick
                    }
                }
                guard let finished = await group.next() else { break }
                switch finished {
                case .batch(let endpoint, let more):
                    busy.remove(endpoint)
                    if more { due.insert(endpoint) }
                case .tick:
                    ticking = false
                    due.formUnion(endpoints)
                }
            }
            group.cancelAll()
        }
    }

    /// One batch of one endpoint's stream; whether it read a full batch (there may be more).
    func stream(_ id: String) async -> Bool {
        let started = now()
        let lease = Timestamp(milliseconds: started.rawValue + leaseMilliseconds)
        let stream: WebhookStream
        let events: [WebhookEvent]
        let parked: Set<ConversationID>
        do {
            // Paused, or held by another node: nothing to do here.
            guard let leased = try await store.leaseWebhookStream(of: id, now: started, until: lease) else { return false }
            stream = leased
            events = try await store.webhookEvents(after: stream.cursor, limit: Self.streamBatch)
            let queues = Set(events.filter { $0.type != .messageUndelivered }.map(\.conversation))
            parked = try await store.parkedWebhookQueues(of: id, among: queues.sorted { $0.rawValue < $1.rawValue })
        } catch {
            logger.warning("A webhook endpoint's events could not be read", metadata: ["endpoint": "\(id)", "error": "\(error)"])
            try? await store.releaseWebhookStream(of: id, lease: lease)
            return false
        }
        guard let last = events.last else {
            try? await store.releaseWebhookStream(of: id, lease: lease)
            return false
        }
        let endpoint = stream.endpoint
        let plan = Self.streamPlan(
            events.filter { endpoint.wants($0.type) },
            parked: parked,
            now: started,
            pushDelay: Int64(WebhookRetryPolicy.seconds(settings.pushDelay) * 1000)
        )
        var parking = plan.parking
        var answeredAt: Timestamp?
        let deadline = lease.rawValue - 5000
        await withTaskGroup(of: QueueOutcome.self) { group in
            var waiting = plan.queues[...]
            for _ in 0..<min(settings.maxInFlightPerEndpoint, waiting.count) {
                let queue = waiting.removeFirst()
                group.addTask { await self.deliver(queue, to: endpoint, deadline: deadline) }
            }
            for await outcome in group {
                parking += outcome.parking
                if let at = outcome.answeredAt { answeredAt = max(answeredAt ?? at, at) }
                if let queue = waiting.popFirst() {
                    group.addTask { await self.deliver(queue, to: endpoint, deadline: deadline) }
                }
            }
        }
        do {
            // In log order, so each parked queue keeps its events' order.
            let advanced = try await store.advanceWebhookStream(
                of: id,
                lease: lease,
                to: last.mark,
                parking: parking.sorted { $0.event.mark < $1.event.mark },
                answeredAt: answeredAt
            )
            return advanced && events.count == Self.streamBatch
        } catch {
            // The lease runs out and the batch is handed over again: at least once, never lost.
            logger.warning("A webhook endpoint's cursor could not be moved", metadata: ["endpoint": "\(id)", "error": "\(error)"])
            return false
        }
    }

    /// What a batch does before any request: the events of a conversation with parked deliveries wait behind them,
    /// `message.undelivered` events wait for their moment (parked, due then), the others go out as queues, one per
    /// conversation, in log order.
    static func streamPlan(
        _ events: [WebhookEvent],
        parked: Set<ConversationID>,
        now: Timestamp,
        pushDelay: Int64
    ) -> (queues: [[WebhookEvent]], parking: [WebhookParking]) {
        var parking: [WebhookParking] = []
        var order: [ConversationID] = []
        var queues: [ConversationID: [WebhookEvent]] = [:]
        for event in events {
            if event.type == .messageUndelivered {
                parking.append(
                    WebhookParking(event: event, nextAttemptAt: Timestamp(milliseconds: event.createdAt.rawValue + pushDelay))
                )
            } else if parked.contains(event.conversation) {
                parking.append(WebhookParking(event: event, nextAttemptAt: now))
            } else {
                if queues[event.conversation] == nil { order.append(event.conversation) }
                queues[event.conversation, default: []].append(event)
            }
        }
        return (order.map { queues[$0]! }, parking)
    }

    struct QueueOutcome: Sendable {
        var parking: [WebhookParking] = []
        var answeredAt: Timestamp?
    }

    /// A conversation's events, one attempt at a time, in order. The first not accepted is parked to be retried (or
    /// failed, past its retry period: then the next goes on), and the rest wait behind it, parked too; so does what
    /// could not start before `deadline`, which also ends the attempt under way, answer included (it counts as
    /// failed and is retried): nothing this stream sends outlives its lease.
    private func deliver(_ queue: [WebhookEvent], to endpoint: WebhookEndpoint, deadline: Int64) async -> QueueOutcome {
        let attempted = await withTaskGroup(of: [WebhookAttempt]?.self) { group -> [WebhookAttempt] in
            group.addTask {
                var attempts: [WebhookAttempt] = []
                for event in queue {
                    if self.now().rawValue + self.attemptMilliseconds > deadline || Task.isCancelled { break }
                    let attempt = await self.attempt(event.delivery, to: endpoint, lease: Timestamp(milliseconds: deadline))
                    attempts.append(attempt)
                    if case .retry = attempt.outcome { break }
                }
                return attempts
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(max(0, deadline - self.now().rawValue)))
                return nil
            }
            var attempts: [WebhookAttempt] = []
            if let first = await group.next(), let finished = first { attempts = finished }
            group.cancelAll()
            for await late in group { if let late { attempts = late } }
            return attempts
        }
        var outcome = QueueOutcome()
        for (event, attempt) in zip(queue, attempted) {
            switch attempt.outcome {
            case .delivered:
                outcome.answeredAt = attempt.at
            case .retry(let at):
                outcome.parking.append(
                    WebhookParking(
                        event: event, attempts: 1, nextAttemptAt: at, lastStatus: attempt.status, lastError: attempt.error
                    )
                )
            case .failed:
                outcome.parking.append(
                    WebhookParking(
                        event: event, state: .failed, attempts: 1, nextAttemptAt: attempt.at, lastStatus: attempt.status,
                        lastError: attempt.error
                    )
                )
            case .released, .deferred:
                break
            }
        }
        // What was not attempted waits behind what was not accepted (or for the next attempt), due now.
        let waiting = now()
        outcome.parking += queue.dropFirst(attempted.count).map { WebhookParking(event: $0, nextAttemptAt: waiting) }
        return outcome
    }
}
