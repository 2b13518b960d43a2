// Courier — Apache-2.0
internal import Foundation
internal import Logging
internal import PostgresNIO

/// Fresh PostgreSQL databases for tests, created on the server named by `COURIER_TEST_POSTGRES_URL`
/// (`.ci/postgres.sh` starts one and prints the URL). Tests that need PostgreSQL are enabled only when it is set.
public enum PostgresTestDatabase {
    /// The server's URL, when the environment provides one.
    public static var serverURL: String? {
        ProcessInfo.processInfo.environment["COURIER_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether PostgreSQL tests can run.
    public static var isAvailable: Bool { serverURL != nil }

    /// Creates an empty database and returns its URL.
    public static func create() async throws -> String {
        guard let serverURL, var components = URLComponents(string: serverURL), let host = components.host,
            let user = components.user
        else { throw PostgresTestDatabaseError.notConfigured }
        let name = "courier_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let configuration = PostgresConnection.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/")).nilIfEmpty,
            tls: .disable
        )
        let logger = Logger(label: "courier.test.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        components.path = "/" + name
        return components.string ?? serverURL
    }
}

enum PostgresTestDatabaseError: Error { case notConfigured }

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
