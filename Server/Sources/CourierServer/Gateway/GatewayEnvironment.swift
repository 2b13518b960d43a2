// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import HummingbirdWebSocket
internal import NIOCore
internal import NIOWebSocket

/// What every session shares: one instance, referenced by each session (a value of this size copied into every
/// connection's task frames cost about 4 KiB per idle connection).
final class GatewayEnvironment: Sendable {
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

    init(
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
        self.serverLimits = serverLimits
        self.readReceiptPolicy = readReceiptPolicy
        self.metrics = metrics
        self.now = now
    }
}
