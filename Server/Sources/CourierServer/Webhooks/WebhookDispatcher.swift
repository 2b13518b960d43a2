// Courier — Apache-2.0
internal import CoreMetrics
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Crypto
internal import Foundation
internal import Logging
internal import NIOCore
internal import NIOHTTP1
internal import ServiceLifecycle
internal import Synchronization

/// Delivers the logged webhook events of every node's changes (each node runs one; on PostgreSQL they share the
/// work through leases). Each endpoint's stream reads the log from its cursor (``streams()``); below, the parked
/// deliveries (not accepted at once, or waiting behind one). Deliveries of one endpoint and conversation go out one at a time, in order, in runs of up to
/// `runLength` (one claim and one write for a run); runs of different queues go side by side, at most
/// `maxInFlightPerEndpoint` to one endpoint, so a slow endpoint holds back only itself. Nothing waits in memory but
/// the runs under way: the backlog stays in the database.
final class WebhookDispatcher: Service, Sendable {
    let store: any CourierStore
    let settings: CourierServerConfiguration.Webhooks
    let now: @Sendable () -> Timestamp
    let logger: Logger
    let metrics: ServerMetrics
    let http: WebhookHTTP
    private let wakeup = Wakeup()
    /// Wakes the endpoints' streams (``streams()``).
    let streamWakeup = Wakeup()

    init(
        store: any CourierStore,
        settings: CourierServerConfiguration.Webhooks,
        metrics: ServerMetrics,
        now: @escaping @Sendable () -> Timestamp,
        logger: Logger
    ) {
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.now = now
        self.logger = logger
        // An endpoint's stream and its retry runs each send up to maxInFlightPerEndpoint at once: a connection each,
        // kept for the next batch, and checked against the address policy before a request is written on it.
        http = WebhookHTTP(
            attemptTimeout: TimeAmount(settings.attemptTimeout),
            maxIdlePerOrigin: 2 * settings.maxInFlightPerEndpoint,
            addressPolicy: WebhookAddressPolicy(allowPrivate: settings.allowPrivateAddresses)
        )
    }

    private let endpointsChanged = Atomic<Bool>(false)
    let streamEndpointsChanged = Atomic<Bool>(false)

    /// Failed attempts logged this minute, per endpoint (``logFailure(_:to:status:error:final:at:)``).
    let failuresLogged = Locked([String: (minute: Int64, count: Int)]())

    /// Whether the last read of the endpoints found any (true until the first read).
    let hasEndpoints = Atomic<Bool>(true)

    /// Something committed on this node may have written events: the endpoints' streams look now rather than at the
    /// next poll. Without an endpoint nothing is woken: a node with no webhooks pays nothing per change (an endpoint
    /// added on another node is found at the next poll, as before). The parked deliveries' loop is not woken by a
    /// change (only a stream parks, and it says so: ``parked()``): a commit wakes one task, not two.
    func nudge() {
        guard hasEndpoints.load(ordering: .relaxed) else { return }
        streamGeneration.add(1, ordering: .sequentiallyConsistent)
        if idleStreams.load(ordering: .sequentiallyConsistent) > 0 { streamWakeup.signal() }
    }

    /// Counts nudges: a stream's cycle that ends after one reads the log again (``streams()``).
    let streamGeneration = Atomic<Int>(0)
    /// Endpoints whose stream has no cycle under way: a nudge wakes the streams' loop only when there is one.
    let idleStreams = Atomic<Int>(1)

    /// A stream parked deliveries, or the API made some due: the parked deliveries' loop looks now.
    func parked() {
        wakeup.signal()
    }

    /// Both loops look now (an endpoint changed or resumed).
    func wake() {
        streamWakeup.signal()
        wakeup.signal()
    }

    /// An endpoint was added, removed or given a new secret through this node: read them again now (other nodes
    /// do at their next poll).
    func reloadEndpoints() {
        endpointsChanged.store(true, ordering: .relaxed)
        streamEndpointsChanged.store(true, ordering: .relaxed)
        wake()
    }

    func run() async throws {
        do {
            try await store.releaseAbandonedWebhookLeases()
        } catch {
            logger.warning("Webhook leases left by a previous process could not be released", metadata: ["error": "\(error)"])
        }
        await cancelWhenGracefulShutdown {
            // The endpoints' streams through the log, and the parked deliveries' queues.
            async let streams: Void = self.streams()
            await self.loop()
            await streams
        }
        await http.shutdown()
    }

    private enum Finished: Sendable {
        case attempt(endpoint: String)
        case tick
    }

    private func loop() async {
        await withTaskGroup(of: Finished.self) { group in
            var perEndpoint: [String: Int] = [:]
            var inFlight = 0
            var ticking = false
            var tickedNow = true
            var endpoints: [String: WebhookEndpoint] = [:]
            var endpointsLoaded: Int64 = 0
            var pruned: Int64 = 0
            let pollMilliseconds = Int64(WebhookRetryPolicy.seconds(settings.pollInterval) * 1000)
            while !Task.isCancelled {
                let time = now()
                // The endpoints, read again every poll interval (another node may have added one, a secret may have
                // been rotated). Without any, a nudge costs nothing but this check.
                if time.rawValue - endpointsLoaded >= pollMilliseconds
                    || endpointsChanged.exchange(false, ordering: .relaxed)
                {
                    endpointsLoaded = time.rawValue
                    if let all = try? await store.webhookEndpoints() {
                        endpoints = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) })
                        hasEndpoints.store(!all.isEmpty, ordering: .relaxed)
                    }
                }
                // Finished deliveries past their retention, at most every minute, a batch at a time.
                if time.rawValue - pruned >= 60_000 {
                    pruned = time.rawValue
                    await prune(before: Timestamp(milliseconds: time.rawValue - Int64(WebhookRetryPolicy.seconds(settings.retention) * 1000)))
                }
                let room = settings.maxInFlight - inFlight
                var claimed: [WebhookDelivery] = []
                // A claim scans the queue heads: claim for a batch of free slots (or whatever is free at a tick).
                if room > 0 && !endpoints.isEmpty && (room >= max(1, settings.maxInFlight / 4) || tickedNow) {
                    do {
                        claimed = try await store.claimWebhookDeliveries(
                            now: time,
                            leaseUntil: Timestamp(milliseconds: time.rawValue + leaseMilliseconds),
                            limit: room,
                            runLength: settings.runLength,
                            slots: WebhookSlots(
                                perEndpoint: settings.maxInFlightPerEndpoint,
                                free: perEndpoint.mapValues { settings.maxInFlightPerEndpoint - $0 }
                            )
                        )
                    } catch {
                        logger.warning("Webhook deliveries could not be claimed", metadata: ["error": "\(error)"])
                    }
                    if claimed.contains(where: { endpoints[$0.endpointID] == nil }),
                        let all = try? await store.webhookEndpoints()
                    {
                        endpoints = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) })
                    }
                }
                tickedNow = false
                let lease = Timestamp(milliseconds: time.rawValue + leaseMilliseconds)
                let runs = Self.runs(of: claimed)
                for run in runs {
                    guard let endpoint = endpoints[run[0].endpointID] else {
                        // Its endpoint was deleted while the change that recorded it committed: nothing to deliver to.
                        try? await store.recordWebhookAttempts(
                            run.map {
                                WebhookAttempt(
                                    seq: $0.seq,
                                    lease: lease,
                                    outcome: .failed,
                                    status: nil,
                                    error: "The endpoint was deleted.",
                                    at: time
                                )
                            }
                        )
                        continue
                    }
                    inFlight += 1
                    perEndpoint[endpoint.id, default: 0] += 1
                    group.addTask {
                        await self.deliver(run, to: endpoint, lease: lease)
                        return .attempt(endpoint: endpoint.id)
                    }
                }
                // Claimed a full batch: there may be more due now.
                if !runs.isEmpty && runs.count == room { continue }
                if !ticking {
                    ticking = true
                    let interval = settings.pollInterval
                    let wakeup = self.wakeup
                    group.addTask {
                        // Whichever comes first: a nudge or the poll interval.
                        await wakeup.wait(atMost: interval)
                        return .tick
                    }
                }
                guard let finished = await group.next() else { break }
                switch finished {
                case .attempt(let endpoint):
                    inFlight -= 1
                    perEndpoint[endpoint, default: 1] -= 1
                    if perEndpoint[endpoint] == 0 { perEndpoint[endpoint] = nil }
                case .tick:
                    ticking = false
                    tickedNow = true
                }
            }
            group.cancelAll()
        }
    }

    /// Deletes finished deliveries older than `cutoff`, in batches (each a short write): at most 10 a pass, so a large
    /// first pass (a backlog of weeks) holds deliveries up for seconds, not minutes; the next pass goes on.
    private func prune(before cutoff: Timestamp) async {
        var total = 0
        for _ in 0..<10 where !Task.isCancelled {
            do {
                let count = try await store.pruneWebhookDeliveries(before: cutoff, limit: 5000)
                total += count
                if count < 5000 { break }
            } catch {
                logger.warning("Finished webhook deliveries could not be pruned", metadata: ["error": "\(error)"])
                break
            }
        }
        if total > 0 { logger.info("Pruned finished webhook deliveries", metadata: ["count": "\(total)"]) }
    }
}

extension WebhookDispatcher {
    /// Failed attempts logged per endpoint each minute; the rest are counted (`courier_webhook_failed_attempts_total`)
    /// and listed with their status and error by `GET /v1/webhooks/{id}/deliveries`.
    static let loggedFailuresPerMinute = 5

    /// A failed attempt, logged: a retry at `notice`, a delivery kept as failed at `warning`; at most
    /// ``loggedFailuresPerMinute`` an endpoint each minute, and one line saying the rest are not logged, so an
    /// endpoint that is down costs a few lines a minute, not one per event.
    func logFailure(
        _ delivery: WebhookDelivery,
        to endpoint: String,
        status: Int?,
        error: String?,
        final: Bool,
        at time: Timestamp
    ) {
        let minute = time.rawValue / 60_000
        let count = failuresLogged.withLock { logged -> Int in
            var entry = logged[endpoint] ?? (minute, 0)
            if entry.minute != minute { entry = (minute, 0) }
            entry.count += 1
            logged[endpoint] = entry
            // Endpoints that failed in an earlier minute only: forgotten.
            if logged.count > 1000 { logged = logged.filter { $0.value.minute == minute } }
            return entry.count
        }
        guard count <= Self.loggedFailuresPerMinute + 1 else { return }
        var metadata: Logger.Metadata = [
            "webhook.endpoint": "\(endpoint)", "webhook.event": "\(delivery.eventID)",
            "webhook.type": "\(delivery.type.rawValue)", "webhook.attempts": "\(delivery.attempts + 1)",
        ]
        if let status { metadata["http.status"] = "\(status)" }
        if let error { metadata["error"] = "\(error)" }
        if count > Self.loggedFailuresPerMinute {
            logger.warning("Webhook attempts keep failing: no more are logged for this endpoint this minute", metadata: metadata)
        } else if final {
            logger.warning("Webhook delivery failed for good (kept as failed; retry it through the API)", metadata: metadata)
        } else {
            logger.notice("Webhook attempt failed; it will be retried", metadata: metadata)
        }
    }
}

/// An attempt that took longer than the attempt timeout, answer included.
struct AttemptTimedOut: Error, CustomStringConvertible {
    var description: String { "The endpoint did not answer within the attempt timeout." }
}

/// Passes publications on, and tells the webhook dispatcher that this node committed something.
struct NudgingEventBus: EventBus {
    let bus: any EventBus
    let dispatcher: WebhookDispatcher

    func publish(_ publication: Publication) {
        dispatcher.nudge()
        bus.publish(publication)
    }
}
