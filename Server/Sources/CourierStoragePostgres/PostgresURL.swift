// Courier — Apache-2.0
internal import Foundation
internal import NIOSSL
internal import PostgresNIO

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]`
struct PostgresURL: Sendable {
    let host: String
    let port: Int
    let username: String
    let password: String?
    let database: String?
    let requiresTLS: Bool

    init(_ text: String) throws(PostgresURLError) {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme),
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else { throw PostgresURLError(url: text) }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.database = path.isEmpty ? nil : path
        let mode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        guard ["disable", "require"].contains(mode) else { throw PostgresURLError(url: text) }
        self.requiresTLS = mode == "require"
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
        durability: PostgresStore.Durability,
        applicationName: String
    ) throws -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host,
            port: port,
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
        applicationName: String,
        connectTimeout: Duration? = nil
    ) throws -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: requiresTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        )
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        if let connectTimeout { configuration.options.connectTimeout = .init(connectTimeout) }
        return configuration
    }
}

/// A PostgreSQL URL the store cannot use. The description never includes the password.
public struct PostgresURLError: Error, CustomStringConvertible {
    let url: String
    public var description: String {
        "Expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]."
    }
}
