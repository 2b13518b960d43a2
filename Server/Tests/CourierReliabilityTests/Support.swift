// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierWire
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The binaries `swift build --build-tests` puts next to the tests, and what every process-level test needs.
enum Binaries {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug")
    static var courierServer: String { folder.appendingPathComponent("courier-server").path }
    static let secret = "reliability-secret-0123456789abcdef0123456789"

    /// A client token for `account`, signed with the app secret every test server gets.
    static func token(for account: AccountID) async throws -> String {
        try await TokenAuthority(secret: try AppSecret(secret)).token(for: account)
    }

    /// The path of `command` on `PATH`, or `nil`.
    static func which(_ command: String) -> String? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/\(command)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// A REST answer as a client sees it: the status, the headers, the body, and the problem's `code` when it is one.
struct RESTAnswer {
    let status: Int
    let headers: [AnyHashable: Any]
    let body: Data
    var requestID: String? { header("X-Request-Id") }

    /// A header's value, its name matched without regard to case.
    func header(_ name: String) -> String? {
        headers.first { ($0.key as? String)?.caseInsensitiveCompare(name) == .orderedSame }?.value as? String
    }
    var code: String? { (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["code"] as? String }
}

extension ServerProcess {
    /// A REST call with the app secret, and what came back.
    func call(_ method: String, _ path: String, json: String? = nil) async throws -> RESTAnswer {
        var request = URLRequest(url: URL(string: httpURL + path)!)
        request.httpMethod = method
        request.timeoutInterval = 60
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(json.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        return RESTAnswer(status: http?.statusCode ?? 0, headers: http?.allHeaderFields ?? [:], body: data)
    }

    /// The value of an unlabelled metric in this server's `/metrics` now, `nil` when it has no such series.
    func metric(_ name: String) async throws -> Double? {
        let text = String(decoding: try await call("GET", "/metrics").body, as: UTF8.self)
        return text.split(separator: "\n").lazy.compactMap { line -> Double? in
            let fields = line.split(separator: " ")
            guard fields.count == 2, fields[0] == name else { return nil }
            return Double(fields[1])
        }.first
    }

    /// The ids of the server's history of `conversation` as `account` sees it, oldest first (REST; empty when the
    /// server refuses).
    func history(_ conversation: ConversationID, as account: AccountID = "bob") async throws -> [String] {
        let (status, body) = try await rest("GET", "/v1/conversations/\(conversation)/messages?account=\(account)&limit=1000")
        guard status == 200 else { return [] }
        struct Page: Decodable { struct Entry: Decodable { let id: String }; let messages: [Entry] }
        return try JSONDecoder().decode(Page.self, from: body).messages.map(\.id)
    }

    /// An app on the SDK, connected as `account` to this server's address (it reconnects to whatever server is
    /// started again on the same port): an in-memory store, a short reconnect backoff.
    func app(_ account: AccountID) async throws -> CourierClient {
        let client = try CourierClient(
            configuration: .init(
                serverURL: URL(string: url)!,
                store: .inMemory,
                requestTimeout: .seconds(20),
                reconnectBackoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)),
                deviceID: "phone"
            )
        )
        try await client.connect(account: account, token: try await Binaries.token(for: account))
        return client
    }

    /// Whether every one of `apps` comes to hold exactly this server's history of `conversation` (as bob sees it,
    /// oldest first), with `history` also satisfying `holds`, within `timeout`: checked again at each of their events.
    func converges(
        _ apps: [CourierClient],
        in conversation: ConversationID,
        within timeout: Duration = .seconds(60),
        where holds: @escaping @Sendable ([String]) -> Bool = { _ in true }
    ) async throws -> Bool {
        try await ConnectionChaosTests.waitUntil(timeout: timeout, woken: apps.map { $0.events() }) {
            let server = try await self.history(conversation)
            guard holds(server) else { return false }
            for app in apps where try await app.messages(in: conversation, limit: 1_000).map(\.id.rawValue) != server {
                return false
            }
            return true
        }
    }

    /// A protocol client connected as `account` that runs `body`, then disconnects.
    func withClient<T: Sendable>(
        _ account: AccountID,
        device: DeviceID = "test",
        onEvent: @escaping @Sendable (ServerEvent) -> Void = { _ in },
        _ body: @escaping @Sendable (ProtocolClient) async throws -> T
    ) async throws -> T {
        let client = ProtocolClient(onEvent: onEvent)
        let token = try await Binaries.token(for: account)
        let box = Box<T>()
        try await client.run(url: url, token: token, account: account, device: device) {
            box.value = try await body(client)
        }
        guard let value = box.value else { throw HarnessError.closed }
        return value
    }
}

extension CourierClient {
    /// Whether this app comes to hold `count` entries of `conversation` within `timeout`. A fresh event stream per wait:
    /// a stream ends when the task reading it is cancelled, so one reused after an earlier wait wakes nobody.
    func holds(_ count: Int, in conversation: ConversationID, within timeout: Duration = .seconds(60)) async throws -> Bool {
        try await ConnectionChaosTests.waitUntil(timeout: timeout, woken: [events()]) {
            try await self.messages(in: conversation, limit: 1_000).count == count
        }
    }
}

/// A value handed out of a `@Sendable` closure (set once, read after it returned).
final class Box<T: Sendable>: @unchecked Sendable {
    // @unchecked: written by one closure before the caller reads it, with the closure's return as the barrier.
    var value: T?
}

/// A value several tasks update under a lock.
final class Shared<T: Sendable>: Sendable {
    private let value: Mutex<T>
    init(_ initial: T) { value = Mutex(initial) }
    func withLock<R: Sendable>(_ body: (inout T) -> R) -> R { value.withLock { body(&$0) } }
}

/// The tests that run PostgreSQL servers of their own and time what a node does when one fails (an outage, a
/// failover, a restore): one after another, so that their answer-time bounds are not measured against each other's
/// clusters starting and stopping on the same cores.
@Suite("PostgreSQL servers of the tests' own", .serialized)
enum PostgresProcessTests {}
