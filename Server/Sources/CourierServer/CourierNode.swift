// Courier — Apache-2.0
public import CourierStorage
internal import CourierDomain
public import Logging
public import ServiceLifecycle
internal import CourierServerCore

/// One Courier server node as a `Service`: prepares its store (migrations), then serves until shutdown. Put the
/// store's own service (a PostgreSQL pool) before it in the `ServiceGroup`.
public struct CourierNode: Service {
    let configuration: CourierServerConfiguration
    let store: any CourierStore
    let changeFeed: (any ChangeFeed)?
    let prepare: @Sendable () async throws -> Void
    let logger: Logger
    let onServerRunning: @Sendable (Int) async -> Void

    /// - Parameters:
    ///   - prepare: Runs before the server listens (e.g. `PostgresStore.migrate()`).
    public init(
        configuration: CourierServerConfiguration,
        store: any CourierStore,
        changeFeed: (any ChangeFeed)? = nil,
        prepare: @escaping @Sendable () async throws -> Void = {},
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.store = store
        self.changeFeed = changeFeed
        self.prepare = prepare
        self.logger = logger
        self.onServerRunning = onServerRunning
    }

    public func run() async throws {
        logger.info("Starting courier-server \(CourierBuild.version)")
        try await prepare()
        let app = await buildApplication(
            configuration: configuration,
            store: store,
            changeFeed: changeFeed,
            logger: logger,
            onServerRunning: onServerRunning
        )
        let started = Locked<ContinuousClock.Instant?>(nil)
        let logger = logger
        try await withGracefulShutdownHandler {
            try await app.run()
        } onGracefulShutdown: {
            started.withLock { $0 = .now }
            logger.info("Draining: no new connections; devices are told to reconnect elsewhere")
        }
        if let began = started.withLock({ $0 }) {
            let took = ContinuousClock.now - began
            logger.info("Drained", metadata: ["courier.duration.ms": .stringConvertible(took.fractionalMilliseconds)])
        }
    }
}
