// Courier — Apache-2.0
internal import Foundation
internal import Logging
internal import NIOSSL
internal import PostgresNIO

/// `postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]…]/DATABASE[?sslmode=disable|require][&target_session_attrs=…]`
///
/// Several hosts name a primary and its standbys (libpq's form): the store writes to the first of them that is not in
/// recovery, and looks again when it cannot reach that one (ADR 0045). `target_session_attrs` may be given as libpq
/// takes it (`read-write`, `primary`, `any`); Courier always needs a primary, so with several hosts every value means
/// `read-write`.
struct PostgresURL: Sendable {
    /// One server of the URL.
    struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        let host: String
        let port: Int
        var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }
    let endpoints: [Endpoint]
    let username: String
    let password: String?
    let database: String?
    let requiresTLS: Bool

    init(_ text: String) throws(PostgresURLError) {
        // URLComponents takes one host: the list is read here, and the rest of the URL with its first host alone.
        guard let scheme = text.range(of: "://") else { throw PostgresURLError() }
        let authorityEnd = text[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" } ?? text.endIndex
        let authority = text[scheme.upperBound..<authorityEnd]
        let hostsStart = authority.lastIndex(of: "@").map(authority.index(after:)) ?? authority.startIndex
        var endpoints: [Endpoint] = []
        for item in authority[hostsStart...].split(separator: ",", omittingEmptySubsequences: false) {
            guard let endpoint = Self.endpoint(item) else { throw PostgresURLError() }
            endpoints.append(endpoint)
        }
        var single = text
        single.replaceSubrange(hostsStart..<authorityEnd, with: authority[hostsStart...].split(separator: ",").first ?? "")
        guard !endpoints.isEmpty, let components = URLComponents(string: single),
            ["postgres", "postgresql"].contains(components.scheme), let user = components.user, !user.isEmpty
        else { throw PostgresURLError() }
        self.endpoints = endpoints
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.database = path.isEmpty ? nil : path
        let mode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        guard ["disable", "require"].contains(mode) else { throw PostgresURLError() }
        self.requiresTLS = mode == "require"
        let attributes = components.queryItems?.first { $0.name == "target_session_attrs" }?.value ?? "any"
        guard ["any", "read-write", "primary"].contains(attributes) else { throw PostgresURLError() }
    }

    /// `HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT`.
    private static func endpoint(_ text: Substring) -> Endpoint? {
        var host = text
        var port = 5432
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { return nil }
                port = value
            }
        } else if let colon = text.lastIndex(of: ":") {
            guard let value = Int(text[text.index(after: colon)...]) else { return nil }
            host = text[..<colon]
            port = value
        }
        guard !host.isEmpty, (1...65_535).contains(port), !host.contains("@"), !host.contains("/") else { return nil }
        return Endpoint(host: String(host), port: port)
    }

    /// The pool's configuration. Every connection starts with `synchronous_commit` set for `durability` (a
    /// startup parameter, so it holds whatever the server's or the role's default is), and with JIT compilation off:
    /// Courier's statements are short index lookups, and a planner estimate above `jit_above_cost` (a recursive walk
    /// of the webhook queues estimated on a table never analyzed: 300,000) spent 18 ms compiling a 3 ms query.
    /// Statements get generic plans (`plan_cache_mode=force_generic_plan`): the hot path's prepared statements are
    /// planned once per connection instead of at every execution — left to choose, PostgreSQL re-planned them each
    /// time, 12.6 % of its CPU (ADR 0019). Every statement of the store finds its rows through an index whatever the
    /// values bound, so a plan made without them is the plan made with them.
    func clientConfiguration(
        of endpoint: Endpoint,
        durability: PostgresStore.Durability,
        applicationName: String
    ) throws -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: endpoint.host,
            port: endpoint.port,
            username: username,
            password: password,
            database: database,
            tls: requiresTLS ? .require(.makeClientConfiguration()) : .disable
        )
        configuration.options.additionalStartupParameters = [
            ("synchronous_commit", durability.synchronousCommit), ("jit", "off"),
            ("plan_cache_mode", "force_generic_plan"), ("application_name", applicationName),
        ]
        return configuration
    }

    /// A single connection's configuration (the change feed's listener, which never writes).
    func connectionConfiguration(
        of endpoint: Endpoint,
        applicationName: String,
        connectTimeout: Duration? = nil
    ) throws -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: endpoint.host,
            port: endpoint.port,
            username: username,
            password: password,
            database: database,
            tls: requiresTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        )
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        if let connectTimeout { configuration.options.connectTimeout = .init(connectTimeout) }
        return configuration
    }

    /// A connection of its own to the first server, from `first` on, that can be reached and — when the URL names
    /// several — is not in recovery (a primary), and its index. With one host, that host's connection or its error.
    func connectToPrimary(
        from first: Int = 0,
        applicationName: String,
        connectTimeout: Duration? = nil,
        logger: Logger
    ) async throws -> (PostgresConnection, index: Int) {
        var causes: [String] = []
        for offset in endpoints.indices {
            let index = (first + offset) % endpoints.count
            let endpoint = endpoints[index]
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: try connectionConfiguration(
                        of: endpoint,
                        applicationName: applicationName,
                        connectTimeout: connectTimeout
                    ),
                    id: 0,
                    logger: logger
                )
                guard endpoints.count > 1 else { return (connection, index) }
                let inRecovery = try await connection.query("SELECT pg_is_in_recovery()", logger: logger)
                    .decode(Bool.self).first { _ in true } ?? true
                if !inRecovery { return (connection, index) }
                try? await connection.close()  // a standby: the next host is tried either way
                causes.append("\(endpoint): a standby (in recovery)")
            } catch {
                guard endpoints.count > 1 else { throw error }
                causes.append("\(endpoint): \(PostgresStore.unreachableCause(of: error) ?? String(describing: error))")
            }
        }
        throw NoPrimary(causes: causes)
    }

    /// None of the URL's hosts is a primary that can be reached, and why, host by host.
    struct NoPrimary: Error, CustomStringConvertible {
        let causes: [String]
        var description: String { "No primary among the database hosts: \(causes.joined(separator: "; "))." }
    }
}

/// A PostgreSQL URL the store cannot use. It does not carry the URL, whose password its description must not show.
public struct PostgresURLError: Error, CustomStringConvertible {
    public var description: String {
        "Expected postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]…]/DATABASE[?sslmode=disable|require]"
            + "[&target_session_attrs=read-write]."
    }
}
