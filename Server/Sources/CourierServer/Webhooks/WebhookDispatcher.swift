// Courier — Apache-2.0
internal import AsyncHTTPClient
internal import CoreMetrics
internal import CourierStorage
internal import CourierWire
internal import Crypto
internal import Foundation
internal import Logging
internal import NIOCore
internal import NIOHTTP1
internal import ServiceLifecycle
internal import Synchronization

/// Signs webhook deliveries per the Standard Webhooks specification: `webhook-signature` is `v1,` and the base64
/// HMAC-SHA256 of `id.timestamp.body` under the secret's key (the base64 after `whsec_`), one per secret during a
/// rotation, separated by spaces.
enum WebhookSigner {
    static let prefix = "whsec_"

    /// A new secret: `whsec_` and the base64 of 32 random bytes.
    static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return prefix + Data(bytes).base64EncodedString()
    }

    static func signature(secrets: [String], id: String, timestamp: Int64, body: String) -> String {
        let content = Data("\(id).\(timestamp).\(body)".utf8)
        return secrets.compactMap { secret -> String? in
            guard let key = Data(base64Encoded: String(secret.dropFirst(prefix.count))) else { return nil }
            let code = HMAC<SHA256>.authenticationCode(for: content, using: SymmetricKey(data: key))
            return "v1," + Data(code).base64EncodedString()
        }.joined(separator: " ")
    }
}

/// Delivers the recorded webhook events of every node's changes (each node runs one; on PostgreSQL they share the
/// work through leases). Deliveries of one endpoint and conversation go out one at a time, in order; deliveries to
/// different endpoints run side by side, at most `maxInFlightPerEndpoint` to one endpoint, so a slow endpoint holds
/// back only itself. Nothing waits in memory but the attempts under way: the backlog stays in the database.
final class WebhookDispatcher: Service, Sendable {
    let store: any WebhookStore
    let settings: CourierServerConfiguration.Webhooks
    let now: @Sendable () -> Timestamp
    let logger: Logger
    let metrics: ServerMetrics
    private let client: HTTPClient
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    init(
        store: any WebhookStore,
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
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(Int64(settings.attemptTimeout.components.seconds)))
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        (wakes, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Something committed on this node may have recorded deliveries: look now rather than at the next poll.
    func nudge() { wake.yield() }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.loop()
        }
        try? await client.shutdown()
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
            var endpoints: [String: WebhookEndpoint] = [:]
            var backlogCounted = Timestamp(milliseconds: 0)
            while !Task.isCancelled {
                // The backlog gauge, at most every 5 s (a count of the pending rows).
                if now().rawValue - backlogCounted.rawValue >= 5000 {
                    backlogCounted = now()
                    if let pending = try? await store.pendingWebhookDeliveries() {
                        metrics.webhookBacklog.set(pending)
                    }
                }
                let room = settings.maxInFlight - inFlight
                var claimed: [WebhookDelivery] = []
                if room > 0 {
                    do {
                        let time = now()
                        claimed = try await store.claimWebhookDeliveries(
                            now: time,
                            leaseUntil: Timestamp(milliseconds: time.rawValue + leaseMilliseconds),
                            limit: room,
                            excluding: perEndpoint.filter { $0.value >= settings.maxInFlightPerEndpoint }.map(\.key)
                        )
                        // Fresh endpoints for each batch: a rotated secret signs from the next attempt on.
                        if !claimed.isEmpty {
                            endpoints = Dictionary(
                                uniqueKeysWithValues: try await store.webhookEndpoints().map { ($0.id, $0) }
                            )
                        }
                    } catch {
                        logger.warning("Webhook deliveries could not be claimed", metadata: ["error": "\(error)"])
                    }
                }
                for delivery in claimed {
                    guard let endpoint = endpoints[delivery.endpointID] else { continue }
                    inFlight += 1
                    perEndpoint[endpoint.id, default: 0] += 1
                    group.addTask {
                        await self.attempt(delivery, to: endpoint)
                        return .attempt(endpoint: endpoint.id)
                    }
                }
                // Claimed a full batch: there may be more due now.
                if !claimed.isEmpty && claimed.count == room { continue }
                if !ticking {
                    ticking = true
                    let interval = settings.pollInterval
                    let wakes = self.wakes
                    group.addTask {
                        // Whichever comes first: a nudge or the poll interval.
                        await withTaskGroup(of: Void.self) { waits in
                            waits.addTask { for await _ in wakes { return } }
                            waits.addTask { try? await Task.sleep(for: interval) }
                            await waits.next()
                            waits.cancelAll()
                        }
                        return .tick
                    }
                }
                guard let finished = await group.next() else { break }
                switch finished {
                case .attempt(let endpoint):
                    inFlight -= 1
                    perEndpoint[endpoint, default: 1] -= 1
                case .tick:
                    ticking = false
                }
            }
            group.cancelAll()
        }
    }

    /// A claimed delivery stays leased this long: an attempt under way (with its timeout) never outlives it, and a
    /// node that died mid-attempt leaves it to the others after it.
    private var leaseMilliseconds: Int64 { (settings.attemptTimeout.components.seconds + 20) * 1000 }

    private func attempt(_ delivery: WebhookDelivery, to endpoint: WebhookEndpoint) async {
        let sentAt = now()
        let timestamp = sentAt.rawValue / 1000
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Courier-Webhooks/1")
        request.headers.add(name: "webhook-id", value: delivery.eventID)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature",
            value: WebhookSigner.signature(
                secrets: endpoint.signingSecrets(at: sentAt),
                id: delivery.eventID,
                timestamp: timestamp,
                body: delivery.payload
            )
        )
        request.body = .bytes(ByteBuffer(string: delivery.payload))
        var status: Int?
        var failure: String?
        do {
            let response = try await client.execute(request, timeout: .init(settings.attemptTimeout))
            status = Int(response.status.code)
            // Read (and drop) what the receiver answered, up to a small bound, so the connection can be reused.
            _ = try? await response.body.collect(upTo: 64 * 1024)
        } catch {
            failure = String(describing: error).prefix(300).description
        }
        let finished = now()
        let outcome: WebhookAttempt.Outcome
        if let status, (200..<300).contains(status) {
            outcome = .delivered
            metrics.webhookDelivered(delivery.type.rawValue, lagMilliseconds: finished.rawValue - delivery.createdAt.rawValue)
        } else {
            let expiresAt = delivery.expiresAt ?? settings.retry.expiry(from: delivery.createdAt)
            outcome = settings.retry.nextAttempt(after: delivery.attempts + 1, now: finished, expiresAt: expiresAt)
                .map { .retry(at: $0) } ?? .failed
            metrics.webhookFailedAttempt(delivery.type.rawValue, final: outcome == .failed)
        }
        let result = WebhookAttempt(
            seq: delivery.seq,
            outcome: outcome,
            status: status,
            error: outcome == .delivered ? nil : failure ?? status.map { "The endpoint answered \($0)." },
            at: finished
        )
        do {
            try await store.recordWebhookAttempt(result)
        } catch {
            // The lease runs out and the delivery is attempted again: at least once, never lost.
            logger.warning("A webhook attempt could not be recorded", metadata: ["error": "\(error)"])
        }
    }
}

/// Passes publications on, and tells the webhook dispatcher that this node committed something.
struct NudgingEventBus: EventBus {
    let bus: any EventBus
    let dispatcher: WebhookDispatcher

    func publish(_ publication: Publication) async {
        dispatcher.nudge()
        await bus.publish(publication)
    }
}
