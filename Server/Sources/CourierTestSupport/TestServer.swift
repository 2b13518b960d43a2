// Courier — Apache-2.0
public import CourierSDK
public import CourierServer
public import CourierStorageSQLite
public import Foundation
internal import Logging
internal import ServiceLifecycle
internal import Synchronization

/// A real Courier server on 127.0.0.1 (port 0) for one test, and helpers to reach it.
public final class TestServer: Sendable {
    public let port: Int
    public let store: SQLiteStore
    public let secret: AppSecret
    let tokens: TokenAuthority
    private let clients = Mutex<[CourierClient]>([])

    init(port: Int, store: SQLiteStore, secret: AppSecret) async {
        self.port = port
        self.store = store
        self.secret = secret
        self.tokens = await TokenAuthority(secret: secret)
    }

    /// `ws://127.0.0.1:PORT/v1/ws`
    public var webSocketURL: URL { URL(string: "ws://127.0.0.1:\(port)/v1/ws")! }
    /// `http://127.0.0.1:PORT`
    public var httpURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A client token for `account`.
    public func token(for account: AccountID, lifetime: Duration = .seconds(3600)) async throws -> String {
        try await tokens.token(for: account, lifetime: lifetime)
    }

    /// Registers accounts, as the app's backend would through the REST API.
    public func register(_ accounts: AccountID...) async throws {
        for account in accounts { try await store.registerAccount(account, at: .now()) }
    }

    /// A new SDK client (in-memory store unless given), connected as `account` and caught up. Disconnected when the
    /// test server stops.
    public func connectedClient(
        _ account: AccountID,
        device: DeviceID? = nil,
        store location: CourierClient.Configuration.StoreLocation = .inMemory,
        configure: (inout CourierClient.Configuration) -> Void = { _ in }
    ) async throws -> CourierClient {
        let client = try self.client(device: device, store: location, configure: configure)
        try await client.connect(account: account, token: try await token(for: account))
        return client
    }

    /// A new SDK client pointed at this server, not connected yet. Disconnected when the test server stops.
    public func client(
        device: DeviceID? = nil,
        store location: CourierClient.Configuration.StoreLocation = .inMemory,
        configure: (inout CourierClient.Configuration) -> Void = { _ in }
    ) throws -> CourierClient {
        var configuration = CourierClient.Configuration(
            serverURL: webSocketURL,
            store: location,
            requestTimeout: .seconds(20),
            reconnectBackoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)),
            deviceID: device
        )
        configure(&configuration)
        let client = try CourierClient(configuration: configuration)
        clients.withLock { $0.append(client) }
        return client
    }

    func disconnectClients() async {
        for client in clients.withLock({ $0 }) { await client.disconnect() }
    }
}

/// Runs `body` against a fresh server and stops it afterwards (gracefully, after disconnecting its clients).
///
/// - Parameters:
///   - location: The database; in memory unless a file is given (e.g. to restart a server on the same data).
///   - configure: Adjusts the configuration (limits, clock) before the server starts.
public func withTestServer<T: Sendable>(
    location: SQLiteStore.Location = .inMemory,
    configure: (inout CourierServerConfiguration) -> Void = { _ in },
    _ body: (TestServer) async throws -> T
) async throws -> T {
    let store = try SQLiteStore(location: location)
    let secret = try AppSecret("test-secret-0123456789abcdef0123456789abcdef")
    var configuration = CourierServerConfiguration(http: .init(host: "127.0.0.1", port: 0), appSecret: secret)
    configure(&configuration)
    var logger = Logger(label: "courier.test")
    logger.logLevel =
        ProcessInfo.processInfo.environment["COURIER_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) }
        ?? .critical
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let app = await buildApplication(configuration: configuration, store: store, logger: logger) { port in
        portContinuation.yield(port)
    }
    let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw TestServerError.didNotStart }
        let server = await TestServer(port: port, store: store, secret: secret)
        let result: Result<T, any Error>
        do { result = .success(try await body(server)) } catch { result = .failure(error) }
        await server.disconnectClients()
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}

enum TestServerError: Error { case didNotStart }
