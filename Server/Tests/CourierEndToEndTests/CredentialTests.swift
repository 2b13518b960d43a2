// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Crypto
import Foundation
import Testing
import Yams

/// Credentials by purpose (ADR 0048): API keys with scopes read from the OpenAPI document, signing keys of
/// their own for client tokens, the audit trail, and REST limits — against a real server on every backend.
@Suite("Credentials and the audit trail", .timeLimit(.minutes(5)))
struct CredentialTests {
    /// An operation of the document the server serves, read with an off-the-shelf YAML parser.
    struct Operation {
        let id: String
        let method: String
        let path: String
        let scopes: Set<String>
        let audited: Bool
    }

    static let scopes = ["accounts", "messages", "groups", "webhooks", "moderation", "import", "server", "audit", "read", "metrics"]

    func operations(_ server: TestServer) async throws -> [Operation] {
        let (status, data) = try await server.restResponse("GET", "/v1/openapi.yaml", secret: false)
        #expect(status == 200)
        let document = try #require(try Yams.load(yaml: String(decoding: data, as: UTF8.self)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: Any])
        var operations: [Operation] = []
        for (path, item) in paths {
            for (method, value) in item as? [String: Any] ?? [:] {
                guard ["get", "post", "put", "patch", "delete"].contains(method), let operation = value as? [String: Any]
                else { continue }
                let security = operation["security"] as? [[String: [String]]] ?? []
                operations.append(
                    Operation(
                        id: try #require(operation["operationId"] as? String),
                        method: method.uppercased(),
                        path: path,
                        scopes: Set(security.flatMap { $0["apiKey"] ?? [] }),
                        audited: method != "get" && (operation["x-courier-audit"] as? Bool ?? true)
                    )
                )
            }
        }
        return operations.sorted { $0.id < $1.id }
    }

    /// `path` with each `{parameter}` filled with a value of its shape.
    func concrete(_ path: String) -> String {
        path.replacingOccurrences(of: "{conversation}", with: "d:nobody1:nobody2")
            .replacingOccurrences(of: "{deliverySeq}", with: "1")
            .replacingOccurrences(of: "{list}", with: "read")
            .replacingOccurrences(of: #"\{[A-Za-z]+\}"#, with: "nobody", options: .regularExpression)
    }

    struct Created: Decodable {
        struct Key: Decodable { let id: String; let scopes: [String]; let revokedAt: Int64? }
        let key: Key
        let credential: String
    }

    func makeKey(_ server: TestServer, scopes: [String], expiresAt: Int64? = nil) async throws -> Created {
        let expiry = expiresAt.map { #","expiresAt":\#($0)"# } ?? ""
        let (status, data) = try await server.restResponse(
            "POST",
            "/v1/keys",
            body: #"{"name":"test","scopes":[\#(scopes.map { "\"\($0)\"" }.joined(separator: ","))]\#(expiry)}"#
        )
        #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
        return try JSONDecoder().decode(Created.self, from: data)
    }

    struct Problem: Decodable { let code: String }

    @Test("every operation of the document: a key with one of its scopes gets through, a key with another is 403 auth.scopeMissing")
    func scopesFromTheDocument() async throws {
        try await withTestServer { server in
            let operations = try await operations(server)
            #expect(operations.count > 50)
            var keys: [String: String] = [:]
            for scope in Self.scopes { keys[scope] = try await makeKey(server, scopes: [scope]).credential }
            for operation in operations {
                let path = concrete(operation.path)
                let body = operation.method == "GET" || operation.method == "DELETE" ? nil : "{}"
                // A route this server did not register (media without a media folder) answers 404 to everyone.
                let root = try await server.restAnswer(operation.method, path, body: body, authorization: "Bearer \(server.secret.value)")
                if root.status == 404, (try? JSONDecoder().decode(Problem.self, from: root.body))?.code == "request.notFound",
                    operation.path.contains("media")
                {
                    continue
                }
                #expect(root.status != 401 && root.status != 403, "\(operation.id) with the app secret: \(root.status)")
                for scope in Self.scopes {
                    let answer = try await server.restAnswer(operation.method, path, body: body, authorization: "Bearer \(keys[scope]!)")
                    let code = (try? JSONDecoder().decode(Problem.self, from: answer.body))?.code
                    if operation.scopes.contains(scope) {
                        #expect(code != "auth.scopeMissing" && answer.status != 401, "\(operation.id) with \(scope): \(answer.status)")
                    } else {
                        #expect(answer.status == 403 && code == "auth.scopeMissing", "\(operation.id) with \(scope): \(answer.status) \(code ?? "")")
                    }
                }
            }
            // The scope is checked before the body is read: a key without it is refused whatever it sends.
            let large = "{\"group\":\"" + String(repeating: "x", count: 2 << 20) + "\"}"
            let refusedUnread = try await server.restAnswer("POST", "/v1/groups", body: large, authorization: "Bearer \(keys["accounts"]!)")
            #expect(refusedUnread.status == 403)
            #expect(try await server.restAnswer("POST", "/v1/groups", body: large, authorization: "Bearer \(keys["groups"]!)").status == 413)
            // Keys are the app secret's alone: no scope lets a key make one.
            #expect(try #require(operations.first { $0.id == "createAPIKey" }).scopes.isEmpty)
        }
    }

    @Test("a key is shown once and stored as a digest; revoked and expired keys are refused", arguments: ServerBackend.available)
    func keyLifecycle(backend: ServerBackend) async throws {
        // The server's clock, which the test moves past a key's expiry.
        let skew = Locked<Int64>(0)
        let now = { @Sendable in Timestamp(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) + skew.withLock { $0 }) }
        try await withTestServer(on: backend, configure: { $0.now = now }) { server in
            let created = try await makeKey(server, scopes: ["accounts", "read"])
            #expect(created.credential.hasPrefix("ck_\(created.key.id)_") && created.key.scopes == ["accounts", "read"])
            let secretPart = String(created.credential.split(separator: "_").last!)
            // The database has the digest, never the secret; lists never show it.
            let stored = try #require(try await server.store.apiKey(created.key.id))
            #expect(stored.secretDigest.count == 64 && !stored.secretDigest.contains(secretPart))
            let listed = try await server.restResponse("GET", "/v1/keys")
            #expect(!String(decoding: listed.body, as: UTF8.self).contains(secretPart))

            let use = { (credential: String) in
                try await server.restAnswer("PUT", "/v1/accounts/alice", authorization: "Bearer \(credential)")
            }
            #expect(try await use(created.credential).status == 204)
            // A wrong secret for a real id, and a made-up key, are both 401.
            #expect(try await use("ck_\(created.key.id)_" + String(repeating: "0", count: 64)).status == 401)
            #expect(try await use("ck_0123456789abcdef_" + String(repeating: "0", count: 64)).status == 401)

            #expect(try await server.rest("DELETE", "/v1/keys/\(created.key.id)").status == 200)
            let revoked = try await use(created.credential)
            #expect(revoked.status == 401 && String(decoding: revoked.body, as: UTF8.self).contains("revoked"))
            #expect(try await server.rest("DELETE", "/v1/keys/0000000000000000").code == "key.notFound")

            // Bad input makes no key: a key without scopes, a name past 100 characters, a scope that does not exist.
            for bad in [
                #"{"name":"x","scopes":[]}"#, #"{"name":"\#(String(repeating: "n", count: 101))","scopes":["read"]}"#,
                #"{"name":" ","scopes":["read"]}"#, #"{"name":"x","scopes":["everything"]}"#,
            ] {
                let refused = try await server.rest("POST", "/v1/keys", body: bad)
                #expect(refused.status == 400 && refused.code == "request.invalidArgument", "\(bad.prefix(40))")
            }
            #expect(try await server.store.apiKeys().count == 1)
            // An expiry in the past is refused; a key is refused once its expiry passes.
            let start = now().rawValue
            #expect(try await server.rest("POST", "/v1/keys", body: #"{"name":"x","scopes":["read"],"expiresAt":\#(start - 1)}"#).status == 400)
            let shortLived = try await makeKey(server, scopes: ["accounts"], expiresAt: start + 60_000)
            #expect(try await use(shortLived.credential).status == 204)
            skew.withLock { $0 = 61_000 }
            let expired = try await use(shortLived.credential)
            #expect(expired.status == 401 && String(decoding: expired.body, as: UTF8.self).contains("expired"))
        }
    }

    @Test("/metrics takes a metrics key; a key of any other scope is refused")
    func metricsKey() async throws {
        try await withTestServer { server in
            let metrics = try await makeKey(server, scopes: ["metrics"])
            let scraped = try await server.restAnswer("GET", "/metrics", authorization: "Bearer \(metrics.credential)")
            #expect(scraped.status == 200 && String(decoding: scraped.body, as: UTF8.self).contains("courier_store_reachable"))
            // …and nothing else.
            #expect(try await server.restAnswer("PUT", "/v1/accounts/alice", authorization: "Bearer \(metrics.credential)").status == 403)
            let read = try await makeKey(server, scopes: ["read"])
            #expect(try await server.restAnswer("GET", "/metrics", authorization: "Bearer \(read.credential)").status == 403)
            #expect(try await server.restAnswer("GET", "/metrics", authorization: nil).status == 401)
        }
    }

    // MARK: Signing keys

    /// The `kid` in a JWT's header.
    func kid(_ token: String) throws -> String? {
        var part = String(token.split(separator: ".")[0]).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while part.count % 4 != 0 { part += "=" }
        let header = try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: part))) as? [String: Any]
        return header?["kid"] as? String
    }

    /// A token a backend signs itself with a signing key's secret.
    func signed(for account: String, kid: String, secret: String) -> String {
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let now = Int(Date().timeIntervalSince1970)
        let head = base64URL(Data(#"{"alg":"HS256","kid":"\#(kid)","typ":"JWT"}"#.utf8))
        let claims = base64URL(Data(#"{"sub":"\#(account)","iat":\#(now),"exp":\#(now + 600)}"#.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(head).\(claims)".utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "\(head).\(claims).\(base64URL(Data(mac)))"
    }

    struct Minted: Decodable { let token: String }
    struct SigningKeyCreated: Decodable { let kid: String; let secret: String }

    func mint(_ server: TestServer, _ account: String) async throws -> String {
        let (status, data) = try await server.restResponse("POST", "/v1/accounts/\(account)/tokens", body: "{}")
        #expect(status == 201)
        return try JSONDecoder().decode(Minted.self, from: data).token
    }

    /// Whether a device connects with `token`.
    func connects(_ server: TestServer, _ token: String) async throws -> Bool {
        let client = try server.client()
        do {
            try await client.connect(account: "alice", token: token)
            await client.disconnect()
            return true
        } catch let error as CourierError where error.code == .authInvalidToken {
            return false
        }
    }

    @Test("signing keys: tokens name their key; a rotation keeps the old one's tokens until it retires; the only signing key stays", arguments: ServerBackend.available)
    func signingKeyRotation(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice")
            let first = try await mint(server, "alice")
            let firstKid = try #require(try kid(first))
            #expect(try await connects(server, first))

            let (status, data) = try await server.restResponse("POST", "/v1/signing-keys", body: #"{"retireAfterSeconds":3600}"#)
            #expect(status == 201)
            let rotated = try JSONDecoder().decode(SigningKeyCreated.self, from: data)
            #expect(rotated.kid != firstKid)
            let second = try await mint(server, "alice")
            #expect(try kid(second) == rotated.kid)
            // The old key's tokens work until it retires; a token the backend signs itself with the new key works.
            #expect(try await connects(server, first))
            #expect(try await connects(server, signed(for: "alice", kid: rotated.kid, secret: rotated.secret)))
            #expect(!(try await connects(server, signed(for: "alice", kid: rotated.kid, secret: "not-the-secret"))))

            #expect(try await server.rest("DELETE", "/v1/signing-keys/\(rotated.kid)").code == "key.lastSigningKey")
            #expect(try await server.rest("DELETE", "/v1/signing-keys/\(firstKid)").status == 200)
            #expect(!(try await connects(server, first)))
            #expect(try await connects(server, second))
            #expect(try await server.rest("DELETE", "/v1/signing-keys/nothing").code == "key.notFound")

            // Tokens signed with the app secret (no kid), as before signing keys, are accepted by default.
            #expect(try await connects(server, try await server.token(for: "alice")))
        }
    }

    @Test("--app-secret-tokens false refuses tokens without a signing key's kid")
    func appSecretTokensOff() async throws {
        try await withTestServer(configure: { $0.tokens.acceptsAppSecretTokens = false }) { server in
            try await server.register("alice")
            #expect(!(try await connects(server, try await server.token(for: "alice"))))
            #expect(try await connects(server, try await mint(server, "alice")))
        }
    }

    @Test("a key made on one node signs tokens the other verifies at once", .enabled(if: PostgresTestDatabase.isAvailable))
    func signingKeysAcrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { a, b in
                try await a.server.register("alice")
                // Both nodes know the first key.
                #expect(try await connects(b.server, try await mint(a.server, "alice")))
                let (status, _) = try await a.server.restResponse("POST", "/v1/signing-keys", body: "{}")
                #expect(status == 201)
                let token = try await mint(a.server, "alice")
                #expect(try await connects(b.server, token))
            }
        }
    }

    // MARK: The audit trail

    struct AuditPage: Decodable {
        struct Row: Decodable {
            let seq: Int64
            let credential: String
            let action: String
            let target: String
            let requestId: String
            let clientAddress: String?
            let status: Int
            let code: String?
        }
        let entries: [Row]
        let nextBefore: Int64?
    }

    func audit(_ server: TestServer, _ query: String = "") async throws -> [AuditPage.Row] {
        var rows: [AuditPage.Row] = []
        var before: Int64?
        repeat {
            let page = "/v1/audit?limit=200" + (before.map { "&before=\($0)" } ?? "") + query
            let (status, data) = try await server.restResponse("GET", page)
            #expect(status == 200)
            let decoded = try JSONDecoder().decode(AuditPage.self, from: data)
            rows += decoded.entries
            before = decoded.nextBefore
        } while before != nil
        return rows
    }

    @Test("every administrative operation leaves one row: credential, action, target, request id, address, outcome", arguments: ServerBackend.available)
    func everyOperationAudited(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let operations = try await operations(server)
            let key = try await makeKey(server, scopes: ["accounts", "moderation"])
            var expected: [String: (operation: Operation, status: Int)] = [:]
            var unaudited: [String] = []
            for (index, operation) in operations.enumerated() where operation.method != "GET" {
                let requestID = "audit-\(index)"
                let body = operation.method == "DELETE" ? nil : "{}"
                let answer = try await server.restAnswer(
                    operation.method,
                    concrete(operation.path),
                    body: body,
                    authorization: "Bearer \(server.secret.value)",
                    headers: ["X-Request-Id": requestID]
                )
                if answer.status == 404, operation.path.contains("media") { continue }
                if operation.audited { expected[requestID] = (operation, answer.status) } else { unaudited.append(requestID) }
            }
            #expect(expected.count > 25 && unaudited.count >= 3)
            // A key's action, and its refusal outside its scopes.
            let deactivate = try await server.restAnswer(
                "POST", "/v1/accounts/alice/deactivate", authorization: "Bearer \(key.credential)", headers: ["X-Request-Id": "by-key"])
            let refused = try await server.restAnswer(
                "POST", "/v1/groups", body: "{}", authorization: "Bearer \(key.credential)", headers: ["X-Request-Id": "refused"])
            #expect(refused.status == 403)

            let rows = try await audit(server)
            let byRequest = Dictionary(grouping: rows, by: \.requestId)
            for (requestID, (operation, status)) in expected {
                let found = byRequest[requestID] ?? []
                #expect(found.count == 1, "\(operation.id): \(found.count) rows")
                guard let row = found.first else { continue }
                #expect(row.action == operation.id && row.credential == "root" && row.status == status, "\(operation.id)")
                #expect(row.clientAddress == "127.0.0.1")
                if status >= 400 { #expect(row.code != nil, "\(operation.id) \(status)") }
            }
            for requestID in unaudited { #expect(byRequest[requestID] == nil, "\(requestID) is message traffic") }
            let byKey = try #require(byRequest["by-key"]?.first)
            #expect(byKey.credential == key.key.id && byKey.action == "deactivateAccount" && byKey.target == "account=alice")
            #expect(byKey.status == deactivate.status)
            let refusal = try #require(byRequest["refused"]?.first)
            #expect(refusal.status == 403 && refusal.code == "auth.scopeMissing" && refusal.action == "createGroup")
            // A target is the path parameters as meant, not as escaped in the path.
            _ = try await server.restAnswer(
                "POST", "/v1/conversations/d:alice:bob/purge", body: "{}", authorization: "Bearer \(server.secret.value)",
                headers: ["X-Request-Id": "escaped"])
            #expect(try await audit(server, "&action=purgeConversationMessages").first { $0.requestId == "escaped" }?.target == "conversation=d:alice:bob")
            // Filters.
            let keyRows = try await audit(server, "&credential=\(key.key.id)")
            #expect(Set(keyRows.map(\.requestId)) == ["by-key", "refused"])
            #expect(try await audit(server, "&action=createGroup").allSatisfy { $0.action == "createGroup" })
        }
    }

    @Test("REST limits: a credential past its rate is 429 rate.limited with Retry-After; wrong credentials throttle their address")
    func restLimits() async throws {
        try await withTestServer(configure: {
            $0.limits.restRequestsPerSecond = 1
            $0.tokens.failedConnectsPerMinutePerAddress = 3
        }) { server in
            let key = try await makeKey(server, scopes: ["accounts"])
            // Five seconds' worth at once, then one a second: the first refusal comes after at most 5 + the seconds
            // taken (the key's creation used the app secret's bucket, not this one's).
            let started = ContinuousClock.now
            var accepted = 0
            var refusal: (status: Int, headers: [String: String], body: Data)?
            for _ in 0..<50 {
                let answer = try await server.restAnswer("PUT", "/v1/accounts/alice", authorization: "Bearer \(key.credential)")
                guard answer.status == 204 else {
                    refusal = answer
                    break
                }
                accepted += 1
            }
            let elapsed = (ContinuousClock.now - started).components.seconds
            let refused = try #require(refusal)
            #expect(refused.status == 429 && (try? JSONDecoder().decode(Problem.self, from: refused.body))?.code == "rate.limited")
            #expect(accepted >= 5 && accepted <= 5 + Int(elapsed) + 1)
            #expect(refused.headers["retry-after"].flatMap(Int.init).map { (1...2).contains($0) } == true)
            // Another credential has its own bucket.
            #expect(try await server.rest("PUT", "/v1/accounts/bob").status == 204)

            // Three wrong credentials from this address, then even the right one is refused for a while.
            for _ in 0..<3 {
                #expect(try await server.restAnswer("GET", "/v1/accounts", authorization: "Bearer wrong").status == 401)
            }
            let throttled = try await server.restAnswer("GET", "/v1/accounts", authorization: "Bearer \(server.secret.value)")
            #expect(throttled.status == 429 && throttled.headers["retry-after"] != nil)
            #expect((try? JSONDecoder().decode(Problem.self, from: throttled.body))?.code == "auth.throttled")
        }
    }
}
