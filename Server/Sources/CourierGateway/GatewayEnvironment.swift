// Courier — Apache-2.0
package import CourierStorage
internal import CoreMetrics
internal import CourierDomain
package import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import NIOWebSocket
package import CourierServerCore

/// What every session shares: one instance, referenced by each session (a value of this size copied into every
/// connection's task frames cost about 4 KiB per idle connection).
package final class GatewayEnvironment: Sendable {
    let store: any CourierStore
    let registry: ConnectionRegistry
    let bus: any EventBus
    let tokens: TokenAuthority
    let connectThrottle: ConnectThrottle
    let router: FrameRouter
    let limits: CourierServerConfiguration.Limits
    let serverLimits: ServerLimits
    let readReceiptPolicy: ReadReceiptPolicy
    let metrics: ServerMetrics
    let now: @Sendable () -> Timestamp
    let coder = FrameCoder()
    /// Each account's sends on this node (`accountSendsPerSecond`).
    let accountSends: RateLimiter<AccountID>

    package init(
        store: any CourierStore,
        registry: ConnectionRegistry,
        bus: any EventBus,
        tokens: TokenAuthority,
        connectThrottle: ConnectThrottle,
        router: FrameRouter,
        limits: CourierServerConfiguration.Limits,
        serverLimits: ServerLimits,
        readReceiptPolicy: ReadReceiptPolicy,
        metrics: ServerMetrics,
        now: @escaping @Sendable () -> Timestamp
    ) {
        self.store = store
        self.registry = registry
        self.bus = bus
        self.tokens = tokens
        self.connectThrottle = connectThrottle
        self.router = router
        self.limits = limits
        accountSends = RateLimiter<AccountID>(perSecond: limits.accountSendsPerSecond)
        self.serverLimits = serverLimits
        self.readReceiptPolicy = readReceiptPolicy
        self.metrics = metrics
        self.now = now
    }
}

extension GatewayEnvironment {
    /// Metrics and the debug line of an answered request.
    func record(_ frame: ClientFrame, _ reply: ServerFrame, took: Duration, logger: Logger) {
        metrics.request(frame.type, took: took)
        // Request ids go into the lines that name them, not into a logger copied per request (a per-message cost).
        if logger.logLevel <= .debug {
            var outcome = "ack"
            if case .error(_, let error) = reply { outcome = error.code.rawValue }
            logger.debug(
                "Request answered",
                metadata: [
                    "courier.request.id": "\(frame.requestID)", "courier.request.type": "\(frame.type)",
                    "courier.outcome": "\(outcome)", "courier.duration.ms": .stringConvertible(took.fractionalMilliseconds),
                ]
            )
        }
        switch reply {
        case .error(_, let error): metrics.error(error.code)
        case .ack(_, .sync(let page)):
            metrics.syncPages.increment()
            metrics.syncMessages.increment(by: page.messages.count)
        default: break
        }
    }
}
