// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Logging
internal import NIOCore
internal import Synchronization
internal import CourierServerCore

/// Each endpoint reads the event log from its cursor (ADR 0030): a batch at a time, its conversations side by side and
/// each conversation's events in order; what it could not deliver at once is parked as a delivery of its own, with
/// the rest of its conversation behind it, and the cursor moves past the batch in the same write. The same stream,
/// under the same lease, retries what it parked when it is due (ADR 0059): a cycle looks, the retry runs beside the
/// next cycles, and the cycle after it records the outcomes. There is no other loop.
extension WebhookDispatcher {
    /// Events read from the log at a time, per endpoint (or its `batch`, when larger): what a crash sends again at
    /// most (a batch is handed over as a whole).
    static let streamBatch = 64
    /// And at most this much payload (after the first event): what a batch holds in memory.
    static let streamBatchBytes = 256 * 1024
    /// The least time from the end of an endpoint's cycle to the start of its next (ADR 0041): the most a busy
    /// endpoint's events wait for their cycle, and what bounds its cycles to 100 a second.
    static let streamSpacing = Duration.milliseconds(10)

    private enum StreamFinished: Sendable {
        /// `generation`: ``streamGeneration`` when the cycle ended (a nudge after it means more to read).
        case cycle(endpoint: String, Cycle, generation: Int)
        /// An endpoint's retry ended with these outcomes, for its next cycle to record.
        case retried(endpoint: String, [WebhookAttempt])
        case tick
    }

    /// What a cycle of an endpoint's stream leaves: the stream as this node still holds it, whether to go on at once,
    /// and the parked deliveries it found due, to retry beside the next cycles.
    struct Cycle: Sendable {
        var held: HeldStream?
        var more = false
        var retry: Retry?
        /// Outcomes of a retry that this node, still holding the stream, did not record yet.
        var unrecorded: [WebhookAttempt]?
    }

    /// Parked runs to deliver before `deadline` (5 s before the stream's lease ends).
    struct Retry: Sendable {
        let runs: [[WebhookDelivery]]
        let deadline: Int64
    }

    /// An endpoint's stream this node holds between cycles: its lease (renewed by every move of the cursor), its
    /// cursor, so that a cycle starts without a write, when to look at its parked deliveries again, and when it last
    /// made the endpoint's backoffs due.
    struct HeldStream: Sendable {
        var lease: Timestamp
        var cursor: WebhookCursor
        var parked: ParkedLook
        var woken: Int64
    }

    /// When a stream looks at its parked deliveries: once `at` (milliseconds; 0: in its next cycle), or sooner when
    /// the API made some due (``parkedGeneration`` moved past `generation`) or a poll interval went by since
    /// `lookedAt` (another node's API may have). Nothing parked and nothing new: a look every poll interval, one index
    /// seek.
    struct ParkedLook: Sendable {
        var at: Int64 = 0
        var lookedAt: Int64 = 0
        var generation: Int = -1

        func isDue(now: Int64, generation current: Int, poll: Int64) -> Bool {
            now >= at || now - lookedAt >= poll || generation != current
        }
    }

    /// Hands every endpoint's new events over, each endpoint on its own (one cycle at a time each, so a slow endpoint
    /// holds back only itself): again at once after a cycle that stopped with more to read, else at a nudge or the
    /// poll interval.
    func streams() async {
        await withTaskGroup(of: StreamFinished.self) { group in
            var endpoints: [String] = []
            var loaded: Int64 = 0
            var busy: Set<String> = []
            var held: [String: HeldStream] = [:]
            // Endpoints to read again as soon as their cycle under way (if any) is done.
            var due: Set<String> = []
            var ticking = false
            var pruned: Int64?
            // Endpoints with a retry under way (one at a time each: a look never finds what is being retried), and
            // the outcomes of those that ended, for the endpoint's next cycle to record.
            var retrying: Set<String> = []
            var outcomes: [String: [WebhookAttempt]] = [:]
            while !Task.isCancelled {
                let time = now()
                // Finished deliveries past their retention, a pass at most every minute (of the node's clock), before
                // the cycles it starts: a short write a batch, while the cycles under way go on.
                if pruned.map({ time.rawValue - $0 >= 60_000 }) ?? true {
                    pruned = time.rawValue
                    let cutoff = time.rawValue - Int64(WebhookRetryPolicy.seconds(settings.retention) * 1000)
                    await prune(before: Timestamp(milliseconds: cutoff))
                }
                if time.rawValue - loaded >= pollMilliseconds
                    || streamEndpointsChanged.exchange(false, ordering: .relaxed)
                {
                    loaded = time.rawValue
                    if let all = try? await store.webhookEndpoints() {
                        endpoints = all.map(\.id)
                        hasEndpoints.store(!all.isEmpty, ordering: .relaxed)
                        due.formUnion(endpoints)
                        held = held.filter { endpoints.contains($0.key) }
                        outcomes = outcomes.filter { endpoints.contains($0.key) }
                    }
                }
                for endpoint in endpoints where due.contains(endpoint) && !busy.contains(endpoint) {
                    due.remove(endpoint)
                    busy.insert(endpoint)
                    let holding = held.removeValue(forKey: endpoint)
                    let recording = outcomes.removeValue(forKey: endpoint)
                    let mayLook = !retrying.contains(endpoint)
                    group.addTask {
                        // Nudged after this, the cycle may have missed what the nudge was about: it goes again.
                        let started = self.streamGeneration.load(ordering: .sequentiallyConsistent)
                        var cycle = await self.stream(endpoint, holding: holding, recording: recording, mayLook: mayLook)
                        // Under load, cycles come at most every `streamSpacing`: what commits meanwhile is read in
                        // the next cycle, together, rather than a cycle (three reads and a write) per commit. A quiet
                        // endpoint's next event still goes at once: the wait is over by then.
                        if !cycle.more { try? await Task.sleep(for: Self.streamSpacing) }
                        let ended = self.streamGeneration.load(ordering: .sequentiallyConsistent)
                        cycle.more = cycle.more || ended != started
                        return .cycle(endpoint: endpoint, cycle, generation: ended)
                    }
                }
                // Nudges wake this loop only while some endpoint is idle: with every stream busy, a commit's nudge
                // costs an atomic increment, and each cycle sees it when it ends (one wake-up per commit
                // was the dispatcher's whole cost under load).
                idleStreams.store(max(0, endpoints.count - busy.count), ordering: .sequentiallyConsistent)
                if !ticking {
                    ticking = true
                    let interval = settings.pollInterval
                    let wakeup = streamWakeup
                    group.addTask {
                        await wakeup.wait(atMost: interval)
                        return .tick
                    }
                }
                guard let finished = await group.next() else { break }
                switch finished {
                case .cycle(let endpoint, let cycle, let generation):
                    busy.remove(endpoint)
                    held[endpoint] = cycle.held
                    if let unrecorded = cycle.unrecorded { outcomes[endpoint, default: []] += unrecorded }
                    // Its retry goes out beside its next cycles: a slow or silent receiver of a retried event holds
                    // back neither the endpoint's other conversations nor its new events.
                    if let retry = cycle.retry {
                        retrying.insert(endpoint)
                        group.addTask {
                            .retried(endpoint: endpoint, await self.retry(retry.runs, to: endpoint, deadline: retry.deadline))
                        }
                    }
                    // Idle from now on; a nudge that came after the cycle ended, while no stream was idle, woke
                    // nobody: it is seen here (a nudge counts, then looks for an idle stream; this marks one idle,
                    // then looks at the count).
                    idleStreams.add(1, ordering: .sequentiallyConsistent)
                    let missed = streamGeneration.load(ordering: .sequentiallyConsistent) != generation
                    if cycle.more || missed { due.insert(endpoint) }
                case .retried(let endpoint, let attempts):
                    // Its next cycle, at once, records the outcomes and looks again.
                    retrying.remove(endpoint)
                    outcomes[endpoint, default: []] += attempts
                    due.insert(endpoint)
                case .tick:
                    ticking = false
                    due.formUnion(endpoints)
                }
            }
            group.cancelAll()
        }
    }

    /// One cycle of an endpoint's stream: first the outcomes of the retry that ended since its last cycle
    /// (`recording`; `nil`: none ended), written under the lease; then batches until the log has nothing more (or `maxBatches`), each batch's cursor move written while
    /// the next batch is sent (a move waits for the one before it); last, when they may be due and no retry is under
    /// way (`mayLook`), a look at its parked deliveries, whose due runs it answers for the dispatcher to retry.
    func stream(_ id: String, holding: HeldStream?, recording: [WebhookAttempt]?, mayLook: Bool, maxBatches: Int = 64) async -> Cycle {
        let started = now()
        var lease: Timestamp
        var cursor: WebhookCursor
        var endpoint: WebhookEndpoint
        do {
            if let holding, holding.lease.rawValue - started.rawValue > 2 * attemptMilliseconds {
                // Still held: the endpoint as it is now (paused, filter, secrets) from a read, no write.
                guard let found = try await store.webhookEndpoint(id), found.pausedAt == nil else {
                    // Paused: its last retry's outcomes wait with it, to be recorded once it is resumed.
                    return Cycle(held: holding, unrecorded: recording)
                }
                (endpoint, lease, cursor) = (found, holding.lease, holding.cursor)
            } else {
                let until = Timestamp(milliseconds: started.rawValue + leaseMilliseconds)
                // Paused, or held by another node: nothing to do here (a retry's outcomes are dropped: its deliveries
                // are still pending, and are retried again).
                guard let leased = try await store.leaseWebhookStream(of: id, now: started, until: until, held: holding?.lease) else {
                    return Cycle()
                }
                (endpoint, lease, cursor) = (leased.endpoint, until, leased.cursor)
            }
        } catch {
            logger.warning("A webhook endpoint's stream could not be leased", metadata: ["endpoint": "\(id)", "error": "\(error)"])
            return Cycle()
        }
        var look = holding?.parked ?? ParkedLook()
        // A success makes the endpoint's deliveries in backoff due: said at most once a second (a statement more in the
        // write that says it), and then they are looked at.
        var woken = holding?.woken ?? 0
        func throttled(_ answeredAt: Timestamp?) -> Timestamp? {
            guard let at = answeredAt, at.rawValue - woken >= 1000 else { return nil }
            woken = at.rawValue
            look.at = 0
            return at
        }
        if let recording, !recording.isEmpty {
            let renewed = Timestamp(milliseconds: now().rawValue + leaseMilliseconds)
            let answeredAt = throttled(recording.filter { $0.outcome == .delivered && $0.status != nil }.map(\.at).max())
            do {
                // Under a lease another node took over, nothing is recorded: the deliveries are its to retry.
                guard try await store.advanceWebhookStream(
                    of: id, lease: lease, to: cursor, parking: [], attempts: recording, answeredAt: answeredAt,
                    leaseAfter: renewed
                ) else { return Cycle() }
                lease = renewed
            } catch {
                logger.warning("A webhook endpoint's retries could not be recorded", metadata: ["endpoint": "\(id)", "error": "\(error)"])
                return Cycle()
            }
        }
        // What a retry leaves (its queues' next runs, the same ones again when it was cut short) is looked at once it
        // is recorded.
        if recording != nil { look.at = 0 }
        // The move of the batch before, under way, and the queues it parks (not committed yet, so not read back).
        var moving: Task<Bool, Never>?
        var parkedMeanwhile: Set<ConversationID> = []
        var more = false
        for batch in 0..<maxBatches {
            let events: [WebhookEvent]
            let parked: Set<ConversationID>
            do {
                events = try await store.webhookEvents(
                    after: cursor, limit: max(Self.streamBatch, endpoint.batch), maxBytes: Self.streamBatchBytes
                )
                guard !events.isEmpty else { break }
                // The endpoint as it is now, read after the events: an event committed after a change to the
                // endpoint (its URL, secrets, filter, `batch`, a pause) goes out as the endpoint is since the change,
                // even to a cycle that began before it (WebhookBatchTests saw an event sent as a batch after
                // `PATCH batch 0` had been answered).
                guard let current = try await store.webhookEndpoint(id), current.pausedAt == nil else { break }
                endpoint = current
                let queues = Set(events.filter { $0.type != .messageUndelivered }.map(\.conversation))
                parked = try await store.parkedWebhookQueues(of: id, among: queues.sorted { $0.rawValue < $1.rawValue })
                    .union(parkedMeanwhile)
            } catch {
                logger.warning("A webhook endpoint's events could not be read", metadata: ["endpoint": "\(id)", "error": "\(error)"])
                break
            }
            guard let last = events.last else { break }
            let handed = await handOver(events, of: endpoint, parked: parked, deadline: lease.rawValue - 5000)
            // One move at a time, in order: this batch's waits for the one before (a lost lease ends the cycle).
            if let moving, await !moving.value { return Cycle() }
            let renewed = Timestamp(milliseconds: now().rawValue + leaseMilliseconds)
            let answeredAt = throttled(handed.answeredAt)
            let (store, logger, previous) = (self.store, self.logger, lease)
            // A task of its own, not a child of this cycle: a graceful shutdown cancels the cycle, and the move of a
            // batch already delivered must still be written, or the batch goes out again after the lease (the one
            // unstructured task the server keeps; ADR 0034).
            moving = Task {
                do {
                    return try await store.advanceWebhookStream(
                        of: id, lease: previous, to: last.cursor, parking: handed.parking, attempts: [],
                        answeredAt: answeredAt, leaseAfter: renewed
                    )
                } catch {
                    // The lease runs out and the batch is handed over again: at least once, never lost.
                    logger.warning("A webhook endpoint's cursor could not be moved", metadata: ["endpoint": "\(id)", "error": "\(error)"])
                    return false
                }
            }
            (lease, cursor) = (renewed, last.cursor)
            // What it parks is retried when due.
            look.at = handed.parking.filter { $0.state == .pending }.reduce(look.at) { min($0, $1.nextAttemptAt.rawValue) }
            parkedMeanwhile = Set(handed.parking.filter { $0.event.type != .messageUndelivered }.map(\.event.conversation))
            more = batch == maxBatches - 1
            // Nothing accepted and something parked (refused, or behind what was): the endpoint is away or its
            // retries are behind. What follows stays in the log until the next cycle rather than being parked a batch
            // after another.
            if Task.isCancelled || (handed.answeredAt == nil && !handed.parking.isEmpty) { break }
        }
        if let moving, await !moving.value { return Cycle() }
        // Last, with what this cycle parked committed: the parked deliveries due now, for the dispatcher to retry at
        // once, before the lease this cycle leaves runs out.
        var retry: Retry?
        let looked = now()
        let generation = parkedGeneration.load(ordering: .relaxed)
        if mayLook && look.isDue(now: looked.rawValue, generation: generation, poll: pollMilliseconds) {
            look = ParkedLook(at: .max, lookedAt: looked.rawValue, generation: generation)
            do {
                let due = try await store.dueWebhookDeliveries(
                    of: id, now: looked, limit: settings.maxInFlightPerEndpoint, runLength: settings.runLength
                )
                look.at = due.next?.rawValue ?? .max
                if !due.runs.isEmpty { retry = Retry(runs: due.runs, deadline: lease.rawValue - 5000) }
            } catch {
                logger.warning("A webhook endpoint's parked deliveries could not be read", metadata: ["endpoint": "\(id)", "error": "\(error)"])
            }
        }
        return Cycle(held: HeldStream(lease: lease, cursor: cursor, parked: look, woken: woken), more: more, retry: retry)
    }

    /// Delivers parked runs side by side, each one request at a time and in order: every attempt's outcome. The
    /// endpoint is read as it is when the retry starts: one changed since its cycle began (a new URL, secret or
    /// `batch`) is sent to as it is now; one paused or deleted meanwhile gets nothing.
    func retry(_ runs: [[WebhookDelivery]], to id: String, deadline: Int64) async -> [WebhookAttempt] {
        guard let endpoint = try? await store.webhookEndpoint(id), endpoint.pausedAt == nil else { return [] }
        return await withTaskGroup(of: [WebhookAttempt].self) { group in
            for run in runs { group.addTask { await self.deliver(run, to: endpoint, deadline: deadline) } }
            var attempts: [WebhookAttempt] = []
            for await run in group { attempts += run }
            return attempts
        }
    }

    /// Delivers a batch: its conversations side by side (at most `maxInFlightPerEndpoint`), each in order; answers
    /// what to park, in log order (each parked queue keeps its events' order), and when the endpoint last accepted one.
    private func handOver(
        _ events: [WebhookEvent],
        of endpoint: WebhookEndpoint,
        parked: Set<ConversationID>,
        deadline: Int64
    ) async -> QueueOutcome {
        let plan = Self.streamPlan(
            events.filter { endpoint.wants($0.type) },
            parked: parked,
            now: now(),
            pushDelay: Int64(WebhookRetryPolicy.seconds(settings.pushDelay) * 1000)
        )
        var handed = QueueOutcome(parking: plan.parking)
        // One deadline for the whole batch: an attempt that could not be answered before it does not start (its
        // events are parked), and one under way when it comes counts as failed and is retried.
        // Each conversation's events as its requests: one event each, or, when the endpoint takes batches, up to
        // `batch` in order in one.
        let size = max(1, endpoint.batch)
        let groups = plan.queues.map { queue in
            stride(from: 0, to: queue.count, by: size).map { Array(queue[$0..<min($0 + size, queue.count)]) }
        }
        var answers: [[WebhookAnswer]]
        if let (origin, requests) = requests(groups.flatMap { $0.map { $0.map { (delivery: $0.delivery, payload: String?.none) } } }, to: endpoint) {
            var queues: [[WebhookRequest]] = []
            var start = 0
            for queue in groups {
                queues.append(Array(requests[start..<start + queue.count]))
                start += queue.count
            }
            answers = await http.send(
                queues,
                to: origin,
                parallel: settings.maxInFlightPerEndpoint,
                deadline: NIODeadline.now() + .milliseconds(max(0, deadline - now().rawValue))
            )
        } else {
            answers = plan.queues.map { _ in [.failed("The endpoint's URL is not an http or https URL.")] }
        }
        let finished = now()
        for (queue, (batches, answered)) in zip(plan.queues, zip(groups, answers)) {
            // A batch's answer is each of its events' answer.
            let attempts = zip(batches, answered).flatMap { batch, answer in
                let jitter = WebhookRetryPolicy.jitter()
                return batch.map { attempt($0.delivery, to: endpoint.id, answered: answer, at: finished, jitter: jitter) }
            }
            let outcome = outcome(of: queue, attempts)
            handed.parking += outcome.parking
            if let at = outcome.answeredAt { handed.answeredAt = max(handed.answeredAt ?? at, at) }
        }
        handed.parking.sort { $0.event.cursor < $1.event.cursor }
        return handed
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

    /// What a conversation's events come to, attempted in order (``WebhookHTTP``) until one was not accepted: that
    /// one is parked to be retried (or failed, past its retry period: then the next went on), and the rest wait behind
    /// it, parked too; so does what could not start before the batch's deadline.
    private func outcome(of queue: [WebhookEvent], _ attempted: [WebhookAttempt]) -> QueueOutcome {
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
            case .deferred:
                break
            }
        }
        // What was not attempted waits behind what was not accepted (or for the next attempt), due now.
        let waiting = now()
        outcome.parking += queue.dropFirst(attempted.count).map { WebhookParking(event: $0, nextAttemptAt: waiting) }
        return outcome
    }
}
