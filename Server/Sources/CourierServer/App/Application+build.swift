// Courier — Apache-2.0
public import CourierStorage
internal import CourierWire
internal import Foundation
public import Hummingbird
internal import HummingbirdWebSocket
public import Logging
internal import NIOCore

/// Builds the Courier server: the WebSocket gateway at `/v1/ws`, `GET /health`, and the REST API for the app's
/// backend under `/v1`. Run it as a `Service` (it is one) in a `ServiceGroup`.
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
    let registry = ConnectionRegistry()
    let bus = LocalEventBus(registry: registry)
    let tokens = await TokenAuthority(secret: configuration.appSecret)
    let access = ConversationAccess(store: store, groups: GroupDirectory())
    let recalls = RecallService(
        store: store,
        access: access,
        window: configuration.recallWindow,
        adminWindow: configuration.adminRecallWindow ?? configuration.recallWindow,
        maxExtraBytes: configuration.limits.maxBodyBytes,
        now: configuration.now
    )
    let reads = ReadService(
        store: store,
        access: access,
        policy: configuration.readReceiptPolicy,
        now: configuration.now
    )
    let environment = GatewayEnvironment(
        store: store,
        registry: registry,
        bus: bus,
        tokens: tokens,
        router: FrameRouter(
            messages: MessageService(
                store: store,
                access: access,
                limits: configuration.limits,
                groupReceipts: configuration.groupReceipts,
                now: configuration.now
            ),
            receipts: ReceiptService(store: store, access: access, now: configuration.now),
            reads: reads,
            recalls: recalls,
            groups: GroupService(
                store: store,
                access: access,
                limits: configuration.limits,
                receipts: configuration.groupReceipts,
                now: configuration.now
            ),
            now: configuration.now
        ),
        limits: configuration.limits,
        serverLimits: configuration.serverLimits,
        readReceiptPolicy: configuration.readReceiptPolicy,
        now: configuration.now
    )
    let webSocketRouter = Router(context: BasicWebSocketRequestContext.self)
    webSocketRouter.ws("/v1/ws") { inbound, outbound, context in
        try await Session(environment: environment).run(inbound: inbound, outbound: outbound, logger: context.logger)
    }
    let limits = configuration.limits
    let fanout = changeFeed.map {
        ClusterFanout(feed: $0, store: store, access: access, bus: bus, registry: registry, logger: logger)
    }
    return Application(
        router: RESTRoutes.router(
            store: store,
            secret: configuration.appSecret,
            recalls: recalls,
            reads: reads,
            bus: bus,
            now: configuration.now
        ),
        server: .http1WebSocketUpgrade(
            webSocketRouter: webSocketRouter,
            configuration: .init(
                ws: .init(
                    maxFrameSize: limits.hardFrameBytes,
                    autoPing: .enabled(timePeriod: .seconds(30)),
                    validateUTF8: true
                )
            )
        ),
        configuration: .init(
            address: .hostname(configuration.http.host, port: configuration.http.port),
            serverName: "courier"
        ),
        services: fanout.map { [$0] } ?? [],
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger
    )
}
