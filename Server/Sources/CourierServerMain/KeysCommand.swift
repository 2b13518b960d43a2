// Courier — Apache-2.0
import ArgumentParser
import CourierServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `courier-server keys`: API keys made, listed and revoked through the running server's REST API with the data
/// folder's app secret (docs/security.md). Through the server rather than the database, so that it works while the
/// server runs (SQLite admits one process), and so that each change is in the audit trail like any other.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make, list and revoke API keys on the running server (docs/security.md).",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make an API key and print its credential (shown this once).",
            discussion: """
                Scopes: accounts, messages, groups, webhooks, moderation, import, server, audit, read, metrics. \
                Example: courier-server keys create --name prometheus --scope metrics
                """
        )
        @Option(help: "What the key is for.") var name: String
        @Option(help: "A scope it has (repeat for several).") var scope: [String]
        @Option(help: "Days until it expires (default: never).") var expiresInDays: Int?
        @OptionGroup var server: ServerAddress

        func run() async throws {
            var body: [String: Any] = ["name": name, "scopes": scope]
            if let days = expiresInDays {
                guard days > 0 else { throw ValidationError("--expires-in-days must be at least 1.") }
                body["expiresAt"] = Int64((Date().timeIntervalSince1970 + Double(days) * 86_400) * 1000)
            }
            let answer = try await server.call("POST", "/v1/keys", body: try JSONSerialization.data(withJSONObject: body))
            guard let created = try JSONSerialization.jsonObject(with: answer) as? [String: Any],
                let credential = created["credential"] as? String
            else { throw ValidationError("The server answered something else than a key.") }
            FileHandle.standardError.write(Data("Keep this credential: it is not shown again.\n".utf8))
            say(credential)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every key as JSON (never a secret).")
        @OptionGroup var server: ServerAddress

        func run() async throws {
            say(String(decoding: try await server.call("GET", "/v1/keys"), as: UTF8.self))
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key (refused on every node within 5 s).")
        @Argument(help: "The key's id (the 16 hex digits after ck_).") var id: String
        @OptionGroup var server: ServerAddress

        func run() async throws {
            say(String(decoding: try await server.call("DELETE", "/v1/keys/\(id)"), as: UTF8.self))
        }
    }
}

/// Where the running server listens, and the app secret it takes.
struct ServerAddress: ParsableArguments {
    @Option(help: "The server's base URL (default: http://HOST:PORT of the settings).") var server: String?
    @OptionGroup var options: Options

    /// Calls the server with the app secret; the body of a 2xx answer.
    func call(_ method: String, _ path: String, body: Data? = nil) async throws -> Data {
        let settings = try options.settings()
        let (secret, _) = try settings.resolveAppSecret(creating: false)
        let host = settings.host == "0.0.0.0" || settings.host == "::" ? "127.0.0.1" : settings.host
        let base = server ?? "http://\(host.contains(":") ? "[\(host)]" : host):\(settings.port)"
        guard let url = URL(string: base + path) else { throw ValidationError("\(base) is not a URL.") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(secret.value)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            FileHandle.standardError.write(Data("\(method) \(path): \(status) \(String(decoding: data, as: UTF8.self))\n".utf8))
            throw ExitCode(1)
        }
        return data
    }
}
