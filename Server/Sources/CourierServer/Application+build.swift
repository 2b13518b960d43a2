// Courier — Apache-2.0
public import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
#if canImport(Glibc)
internal import Glibc
#endif
public import Hummingbird
internal import HummingbirdCore
public import Logging
internal import NIOCore
internal import NIOHTTP1
internal import CourierServerCore
internal import CourierGateway
internal import CourierWebhooks
internal import CourierMedia
internal import CourierREST

/// Builds the Courier server: the WebSocket gateway at `/v1/ws`, `GET /health`, `GET /metrics`, and the REST API for
/// the app's backend under `/v1`. Run it as a `Service` (it is one) in a `ServiceGroup`.
///
/// - Parameters:
///   - configuration: Address, limits, app secret and clock.
///   - store: The opened, migrated store (`GET /health` answers 200 from the moment the server listens, because the
///     store is open before).
///   - changeFeed: Changes committed by other nodes sharing the database (PostgreSQL); `nil` for a single node.
///   - logger: The root logger.
///   - onServerRunning: Called with the bound port once the server listens (useful with port 0).
public func buildApplication(
    configuration: CourierServerConfiguration,
    store: any CourierStore,
    changeFeed: (any ChangeFeed)? = nil,
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async -> some ApplicationProtocol {
    // Where nodes share the store, each records its connections there, so that any node lists every node's.
    let presence = (changeFeed == nil ? nil : store as? any PresenceStore).map { DevicePresence(store: $0, logger: logger) }
    let registry = ConnectionRegistry(presence: presence)
    let metrics = ServerMetrics()
    // The values in force, for the configuration report: the port once bound (0 asks for any), the limit computed.
    let boundPort = Locked(configuration.http.port)
    let maxConnections = configuration.limits.maxConnections ?? ConnectionBudget.fromOpenFilesLimit()
    store.commits.add { metrics.committed($0) }
    let webhooks = WebhookDispatcher(
        store: store,
        settings: configuration.webhooks,
        metrics: metrics,
        now: configuration.now,
        logger: logger
    )
    let bus = NudgingEventBus(bus: LocalEventBus(registry: registry), dispatcher: webhooks)
    let signingKeys = SigningKeyRing(store: store, now: configuration.now)
    let tokens = await TokenAuthority(
        secret: configuration.appSecret,
        leeway: configuration.tokens.leeway,
        maxLifetime: configuration.tokens.maxLifetime,
        signing: signingKeys,
        acceptsAppSecretTokens: configuration.tokens.acceptsAppSecretTokens
    )
    // Wrong REST credentials count against their client address apart from devices' refused tokens (the same limit):
    // devices behind one carrier's address with expired tokens never lock the app's backend out.
    let restAccess = RESTAccess(
        credentials: Credentials(secret: configuration.appSecret, store: store, now: configuration.now),
        store: store,
        throttle: ConnectThrottle(limitPerMinute: configuration.tokens.failedConnectsPerMinutePerAddress),
        requestsPerSecond: configuration.limits.restRequestsPerSecond,
        trustedProxies: configuration.trustedProxies,
        now: configuration.now,
        logger: logger
    )
    var services = CourierServices(configuration: configuration, store: store)
    let media = configuration.media.map {
        MediaService(settings: $0, store: store, access: services.access, now: configuration.now, logger: logger)
    }
    if let media { services.recalls.afterErase = { await media.sweep() } }
    let environment = GatewayEnvironment(
        store: store,
        registry: registry,
        bus: bus,
        tokens: tokens,
        connectThrottle: ConnectThrottle(limitPerMinute: configuration.tokens.failedConnectsPerMinutePerAddress),
        router: FrameRouter(services: services, now: configuration.now),
        limits: configuration.limits,
        serverLimits: configuration.serverLimits,
        readReceiptPolicy: configuration.readReceiptPolicy,
        metrics: metrics,
        now: configuration.now
    )
    // Every session's requests that wait for the store run here (ADR 0034).
    let runner = RequestRunner(writers: store.requestExecutor)
    let limits = configuration.limits
    let fanout = changeFeed.map {
        ClusterFanout(
            feed: $0,
            store: store,
            access: services.access,
            bus: bus,
            registry: registry,
            metrics: metrics,
            hooks: configuration.hooks,
            logger: logger
        )
    }
    var http1 = HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(limits.httpIdleTimeout.components.seconds)))
    // Far below NIO's defaults (80 KiB, 1,000 fields): a Courier request carries a token and a few headers.
    http1.httpDecoder = .init(maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100)
    return Application(
        router: RESTRoutes.router(
            store: store,
            services: services,
            access: restAccess,
            metrics: metrics,
            registry: registry,
            bus: bus,
            changeFeed: changeFeed,
            tokens: tokens,
            signingKeys: signingKeys,
            webhooks: configuration.webhooks,
            dispatcher: webhooks,
            media: media,
            maxBodyBytes: limits.maxRESTBodyBytes,
            settings: { configuration.report(port: boundPort.withLock { $0 }, maxConnections: maxConnections) },
            logLevel: configuration.logLevel,
            staticFiles: ConsoleFiles.all,
            now: configuration.now,
            logger: logger
        ),
        server: .courier(
            http1: http1,
            maxFrameSize: limits.hardFrameBytes,
            headTimeout: limits.requestHeadTimeout,
            maxHeadBytes: limits.maxRequestHeadBytes,
            pingInterval: limits.pingInterval,
            environment: environment,
            runner: runner,
            trustedProxies: configuration.trustedProxies,
            logger: logger
        ),
        configuration: .init(
            address: .hostname(configuration.http.host, port: configuration.http.port),
            serverName: "courier",
            availableConnectionsDelegate: MaximumAvailableConnections(maxConnections, logger: logger)
        ),
        services: [runner, webhooks] + (configuration.auditRetention.map { [AuditRetention(store: store, keep: $0, now: configuration.now, logger: logger)] } ?? [])
            + (fanout.map { [$0] } ?? []) + (presence.map { [$0] } ?? []) + (media.map { [$0] } ?? []),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? 0
            boundPort.withLock { $0 = port }
            await onServerRunning(port)
        },
        logger: logger
    )
}

/// How many connections a node accepts by default: what the open-files limit leaves after a reserve for the store
/// (database files, PostgreSQL pool and listener) and the process itself. Past it, connections wait in the listen
/// backlog instead of failing with EMFILE, and the request-head deadline frees the slots idle sockets hold.
enum ConnectionBudget {
    static let reserve = 128

    static func fromOpenFilesLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(Int32.max) else {
            return 10_000
        }
        return max(16, Int(limit.rlim_cur) - reserve)
    }
}
