// Courier — Apache-2.0
internal import CourierBackends
internal import CourierStoragePostgres
public import CourierSDK
public import CourierServer
public import CourierStorage
internal import CourierDomain
public import CourierStorageSQLite
public import Foundation
internal import Logging

#if canImport(FoundationNetworking)
internal import FoundationNetworking
#endif

/// A real Courier server on 127.0.0.1 (port 0) for one test, and helpers to reach it.
public final class TestServer: Sendable {
    public let port: Int
    public let store: any CourierStore
    public let secret: AppSecret
    let tokens: TokenAuthority
    private let clients = Locked<[CourierClient]>([])

    init(port: Int, store: any CourierStore, secret: AppSecret) async {
        self.port = port
        self.store = store
        self.secret = secret
        self.tokens = await TokenAuthority(secret: secret)
    }

    /// `ws://127.0.0.1:PORT/v1/ws`
    public var webSocketURL: URL { URL(string: "ws://127.0.0.1:\(port)/v1/ws")! }
    /// `http://127.0.0.1:PORT`
    public var httpURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A REST request (`path` relative to ``httpURL``) with the app secret unless `secret` is false: the status and,
    /// for an error, its stable code (the problem's `code` member).
    public func rest(
        _ method: String,
        _ path: String,
        body: String? = nil,
        secret: Bool = true
    ) async throws -> (status: Int, code: String?) {
        let (status, data) = try await restResponse(method, path, body: body, secret: secret)
        struct Problem: Decodable { let code: String? }
        return (status, try? JSONDecoder().decode(Problem.self, from: data).code)
    }

    /// A REST request (`path` relative to ``httpURL``) with the app secret unless `secret` is false: the status and
    /// the body as sent.
    public func restResponse(
        _ method: String,
        _ path: String,
        body: String? = nil,
        secret: Bool = true,
        contentType: String = "application/json"
    ) async throws -> (status: Int, body: Data) {
        let answer = try await restAnswer(
            method,
            path,
            body: body,
            authorization: secret ? "Bearer \(self.secret.value)" : nil,
            contentType: contentType
        )
        return (answer.status, answer.body)
    }

    /// A REST request with `authorization` as its `Authorization` header (none when `nil`) and `headers`: the
    /// status, the response's headers and the body as sent.
    public func restAnswer(
        _ method: String,
        _ path: String,
        body: String? = nil,
        authorization: String?,
        headers: [String: String] = [:],
        contentType: String = "application/json"
    ) async throws -> (status: Int, headers: [String: String], body: Data) {
        // `path` may carry a query: appended as text, not as a path component (which would escape its `?`).
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)" + (path.hasPrefix("/") ? "" : "/") + path)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        if let authorization { request.setValue(authorization, forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] { fields["\(name)".lowercased()] = "\(value)" }
        return (http?.statusCode ?? 0, fields, data)
    }

    /// A client token for `account`, issued `age` seconds ago. A revocation counts from the start of its second
    /// (ADR 0027), so a test that revokes tokens uses one issued at least a second before.
    public func token(for account: AccountID, lifetime: Duration = .seconds(3600), age: TimeInterval = 0) async throws -> String {
        try await tokens.token(for: account, lifetime: lifetime, issuedAt: Date().addingTimeInterval(-age))
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

/// Which store a test server uses.
public enum TestBackend: Sendable {
    /// SQLite, in memory unless a file is given (e.g. to restart a server on the same data).
    case sqlite(SQLiteStore.Location)
    /// A PostgreSQL database (see ``PostgresTestDatabase``); several servers may share it.
    case postgres(url: String)
}

/// Runs `body` against a fresh server on SQLite and stops it afterwards (gracefully, after disconnecting its clients).
///
/// - Parameters:
///   - location: The database; in memory unless a file is given (e.g. to restart a server on the same data).
///   - configure: Adjusts the configuration (limits, clock, port) before the server starts.
public func withTestServer<T: Sendable>(
    location: SQLiteStore.Location = .inMemory,
    configure: (inout CourierServerConfiguration) -> Void = { _ in },
    _ body: (TestServer) async throws -> T
) async throws -> T {
    try await withTestServer(backend: .sqlite(location), configure: configure, body)
}

/// Runs `body` against a fresh server on `backend` and stops it afterwards.
public func withTestServer<T: Sendable>(
    backend: TestBackend,
    configure: (inout CourierServerConfiguration) -> Void = { _ in },
    _ body: (TestServer) async throws -> T
) async throws -> T {
    let node = try await TestNode.start(backend: backend, configure: configure)
    let result: Result<T, any Error>
    do { result = .success(try await body(node.server)) } catch { result = .failure(error) }
    await node.stop()
    return try result.get()
}

/// Runs `body` with two nodes sharing the PostgreSQL database at `url`, both configured by `configure`, and stops both
/// afterwards (gracefully), whether `body` succeeded or not.
public func withTwoNodes<T: Sendable>(
    on url: String,
    configure: (inout CourierServerConfiguration) -> Void = { _ in },
    _ body: (TestNode, TestNode) async throws -> T
) async throws -> T {
    let nodeA = try await TestNode.start(backend: .postgres(url: url), configure: configure)
    let nodeB: TestNode
    do {
        nodeB = try await TestNode.start(backend: .postgres(url: url), configure: configure)
    } catch {
        await nodeA.stop()
        throw error
    }
    let result: Result<T, any Error>
    do { result = .success(try await body(nodeA, nodeB)) } catch { result = .failure(error) }
    await nodeA.stop()
    await nodeB.stop()
    return try result.get()
}

/// A running server node that a test can stop gracefully or kill.
public final class TestNode: Sendable {
    public let server: TestServer
    private let node: EmbeddedNode

    private init(server: TestServer, node: EmbeddedNode) {
        self.server = server
        self.node = node
    }

    /// Starts a node on 127.0.0.1 (port 0 unless `configure` sets one) and waits until it listens.
    public static func start(
        backend: TestBackend,
        configure: (inout CourierServerConfiguration) -> Void = { _ in }
    ) async throws -> TestNode {
        let secret = try AppSecret("test-secret-0123456789abcdef0123456789abcdef")
        var configuration = CourierServerConfiguration(http: .init(host: "127.0.0.1", port: 0), appSecret: secret)
        // A minute to authenticate, not the default 10 s: in a full parallel run on two cores every test's client
        // shares the runtime's two threads with hundreds of others, and a connect has waited over 10 s for them (a
        // test of the deadline itself sets its own).
        configuration.limits.authTimeout = .seconds(60)
        // The tests' webhook receivers listen on 127.0.0.1: loopback endpoints are allowed (a test of the refusal
        // turns it off again).
        configuration.webhooks.allowPrivateAddresses = true
        // No rate limits: tests drive one device far past a person's pace (a test of the limits sets its own).
        configuration.limits.deviceSendsPerSecond = 0
        configuration.limits.restRequestsPerSecond = 0
        configuration.limits.deviceWritesPerSecond = 0
        configuration.limits.accountSendsPerSecond = 0
        configuration.limits.deviceTypingPerSecond = 0
        configure(&configuration)
        var logger = Logger(label: "courier.test")
        logger.logLevel =
            ProcessInfo.processInfo.environment["COURIER_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) }
            ?? .critical
        let opened =
            switch backend {
            case .sqlite(let location): try Backend.sqlite(location)
            case .postgres(let url): try Backend.postgres(url: url, timeouts: .patient, logger: logger)
            }
        let node = try await EmbeddedNode.start(backend: opened, configuration: configuration, logger: logger)
        let server = await TestServer(port: node.port, store: opened.store, secret: secret)
        return TestNode(server: server, node: node)
    }

    /// Disconnects the node's clients, then shuts it down gracefully.
    public func stop() async {
        await server.disconnectClients()
        await node.stop()
    }

    /// Stops the node abruptly (its task tree is cancelled): connected devices see their connection drop.
    public func kill() async {
        await node.kill()
    }
}

/// The backends an end-to-end test runs on: SQLite always, PostgreSQL too when a test server is configured
/// (`COURIER_TEST_POSTGRES_URL`) and not left out (``PostgresTestDatabase/runsPerBackendTests``).
public enum ServerBackend: String, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    public static var available: [ServerBackend] {
        PostgresTestDatabase.runsPerBackendTests ? [.sqlite, .postgres] : [.sqlite]
    }

    public var description: String { rawValue }
}

/// Runs `body` against a fresh server on a fresh database of `backend` (in-memory SQLite, or a new PostgreSQL
/// database) and stops it afterwards.
public func withTestServer<T: Sendable>(
    on backend: ServerBackend,
    configure: (inout CourierServerConfiguration) -> Void = { _ in },
    _ body: (TestServer) async throws -> T
) async throws -> T {
    try await withFreshBackend(backend) { fresh in
        try await withTestServer(backend: fresh, configure: configure, body)
    }
}

/// Runs `body` with a fresh database of `backend`: SQLite at `sqlite` (in memory unless a file is given), or a new
/// PostgreSQL database, dropped afterwards.
public func withFreshBackend<T: Sendable>(
    _ backend: ServerBackend,
    sqlite: SQLiteStore.Location = .inMemory,
    _ body: (TestBackend) async throws -> T
) async throws -> T {
    switch backend {
    case .sqlite: try await body(.sqlite(sqlite))
    case .postgres: try await PostgresTestDatabase.withDatabase { try await body(.postgres(url: $0)) }
    }
}
