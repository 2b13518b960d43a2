// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire
package import Logging
internal import NIOCore
internal import ServiceLifecycle
internal import Synchronization
package import CourierServerCore

/// Delivers the logged webhook events of every node's changes (each node runs one; on PostgreSQL they share the
/// work through leases, one node per endpoint at a time). Each endpoint's stream (``streams()``) reads the log from its
/// cursor and retries its own parked deliveries (not accepted at once, or waiting behind one), each conversation's
/// events in order and conversations side by side, at most `maxInFlightPerEndpoint` requests to one endpoint, so a
/// slow endpoint holds back only itself (ADR 0059). Nothing waits in memory but the requests under way: the backlog
/// stays in the database.
package final class WebhookDispatcher: Service, Sendable {
    let store: any CourierStore
    let settings: CourierServerConfiguration.Webhooks
    let now: @Sendable () -> Timestamp
    let logger: Logger
    let metrics: ServerMetrics
    let http: WebhookHTTP
    /// Wakes the endpoints' streams (``streams()``).
    let streamWakeup = Wakeup()

    package init(
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
        // An endpoint's stream sends up to maxInFlightPerEndpoint at once, for its log's batch and for its retries: a
        // connection each, kept for the next batch, and checked against the address policy before a request is
        // written on it.
        http = WebhookHTTP(
            attemptTimeout: TimeAmount(settings.attemptTimeout),
            maxIdlePerOrigin: 2 * settings.maxInFlightPerEndpoint,
            addressPolicy: WebhookAddressPolicy(allowPrivate: settings.allowPrivateAddresses)
        )
    }

    let streamEndpointsChanged = Atomic<Bool>(false)

    /// Failed attempts logged this minute, per endpoint (``logFailure(_:to:status:error:final:at:)``).
    let failuresLogged = Locked([String: (minute: Int64, count: Int)]())

    /// Whether the last read of the endpoints found any (true until the first read).
    let hasEndpoints = Atomic<Bool>(true)

    /// Something committed on this node may have written events: the endpoints' streams look now rather than at the
    /// next poll. Without an endpoint nothing is woken: a node with no webhooks pays nothing per change (an endpoint
    /// added on another node is found at the next poll, as before).
    func nudge() {
        guard hasEndpoints.load(ordering: .relaxed) else { return }
        streamGeneration.add(1, ordering: .sequentiallyConsistent)
        if idleStreams.load(ordering: .sequentiallyConsistent) > 0 { streamWakeup.signal() }
    }

    /// Counts nudges: a stream's cycle that ends after one reads the log again (``streams()``).
    let streamGeneration = Atomic<Int>(0)
    /// Endpoints whose stream has no cycle under way: a nudge wakes the streams' loop only when there is one.
    let idleStreams = Atomic<Int>(1)

    /// Counts the times the API made parked deliveries due (a retry of failed ones): each stream looks at its
    /// parked deliveries again in its next cycle.
    let parkedGeneration = Atomic<Int>(0)

    /// The API made parked deliveries due: the streams look now.
    package func parked() {
        parkedGeneration.add(1, ordering: .relaxed)
        streamWakeup.signal()
    }

    /// An endpoint was added, removed, changed or resumed through this node: its stream reads the endpoints again now
    /// (other nodes do at their next poll).
    package func reloadEndpoints() {
        streamEndpointsChanged.store(true, ordering: .relaxed)
        streamWakeup.signal()
    }

    func run() async throws {
        do {
            try await store.releaseAbandonedWebhookLeases()
        } catch {
            logger.warning("Webhook leases left by a previous process could not be released", metadata: ["error": "\(error)"])
        }
        await cancelWhenGracefulShutdown { await self.streams() }
        await http.shutdown()
    }

    /// Deletes finished deliveries older than `cutoff`, in batches (each a short write): at most 10 a pass, so a large
    /// first pass (a backlog of weeks) holds deliveries up for seconds, not minutes; the next pass goes on.
    func prune(before cutoff: Timestamp) async {
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
package struct NudgingEventBus: EventBus {
    let bus: any EventBus
    let dispatcher: WebhookDispatcher

    package init(bus: any EventBus, dispatcher: WebhookDispatcher) {
        self.bus = bus
        self.dispatcher = dispatcher
    }

    package func publish(_ publication: Publication) {
        dispatcher.nudge()
        bus.publish(publication)
    }
}
