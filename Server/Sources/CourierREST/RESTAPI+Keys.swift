// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import CourierServerCore

/// API keys, signing keys and the audit trail (ADR 0048, docs/security.md). Keys are the app secret's alone: the
/// document's `security` lists no scope for them.
extension RESTAPI {
    // MARK: API keys

    func createAPIKey(_ input: Operations.CreateAPIKey.Input) async throws -> Operations.CreateAPIKey.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let name = body.name.trimmingCharacters(in: .whitespacesAndNewlines)
        // The document's bounds, checked here: the generated layer does not check lengths and counts.
        guard !name.isEmpty, name.count <= 100 else {
            throw HTTPRequestError(.invalidArgument, "name must be 1–100 characters, not blank.")
        }
        guard (1...Scope.allCases.count).contains(body.scopes.count) else {
            throw HTTPRequestError(.invalidArgument, "scopes must name at least one scope.")
        }
        if let expiresAt = body.expiresAt, expiresAt <= now() {
            throw HTTPRequestError(.invalidArgument, "expiresAt must be in the future.")
        }
        let scopes = Scope.allCases.filter { scope in body.scopes.contains { $0.rawValue == scope.rawValue } }
        let (key, credential) = Credentials.makeKey(
            name: name,
            scopes: scopes,
            expiresAt: body.expiresAt,
            createdBy: RESTCall.current?.caller.credential ?? "root",
            now: now()
        )
        try await storage { try await store.createAPIKey(key) }
        return .created(.init(body: .json(.init(key: Self.json(key), credential: credential))))
    }

    func listAPIKeys(_ input: Operations.ListAPIKeys.Input) async throws -> Operations.ListAPIKeys.Output {
        let keys = try await storage { try await store.apiKeys() }
        return .ok(.init(body: .json(.init(keys: keys.map(Self.json)))))
    }

    func getAPIKey(_ input: Operations.GetAPIKey.Input) async throws -> Operations.GetAPIKey.Output {
        guard let key = try await storage({ try await store.apiKey(input.path.keyId) }) else {
            throw Self.noKey(input.path.keyId)
        }
        return .ok(.init(body: .json(Self.json(key))))
    }

    func revokeAPIKey(_ input: Operations.RevokeAPIKey.Input) async throws -> Operations.RevokeAPIKey.Output {
        guard let key = try await storage({ try await store.revokeAPIKey(input.path.keyId, at: now()) }) else {
            throw Self.noKey(input.path.keyId)
        }
        credentials.forget(key.id)
        return .ok(.init(body: .json(Self.json(key))))
    }

    static func json(_ key: APIKey) -> Components.Schemas.APIKey {
        .init(
            id: key.id,
            name: key.name,
            scopes: key.scopes.compactMap(Components.Schemas.Scope.init(rawValue:)),
            createdAt: key.createdAt,
            createdBy: key.createdBy,
            expiresAt: key.expiresAt,
            revokedAt: key.revokedAt
        )
    }

    static func noKey(_ id: String) -> HTTPRequestError {
        HTTPRequestError(RequestError(.keyNotFound, "No key has the id '\(id)'."))
    }

    // MARK: Signing keys

    func createSigningKey(_ input: Operations.CreateSigningKey.Input) async throws -> Operations.CreateSigningKey.Output {
        var retireAfter = 86_400
        if let body = input.body {
            guard case .json(let body) = body else { throw Self.unsupportedBody }
            retireAfter = body.retireAfterSeconds ?? retireAfter
        }
        guard (0...2_592_000).contains(retireAfter) else {
            throw HTTPRequestError(.invalidArgument, "retireAfterSeconds must be 0–2592000 (30 days).")
        }
        let created = now()
        let key = SigningKeyRing.make(now: created)
        try await storage {
            try await store.rotateSigningKey(
                to: key,
                retiringOthersAt: Timestamp(milliseconds: created.rawValue + Int64(retireAfter) * 1000)
            )
            try await signingKeys.reload()
        }
        return .created(.init(body: .json(.init(kid: key.kid, createdAt: key.createdAt, secret: key.secret))))
    }

    func listSigningKeys(_ input: Operations.ListSigningKeys.Input) async throws -> Operations.ListSigningKeys.Output {
        // The first key is made at the first need: listing them is one (the operator sees the key in use).
        _ = try await storage { try await signingKeys.current() }
        let keys = try await storage { try await store.signingKeys() }
        let signing = keys.filter { $0.retiresAt == nil }.max { ($0.createdAt, $0.kid) < ($1.createdAt, $1.kid) }?.kid
        return .ok(.init(body: .json(.init(keys: keys.map { Self.json($0, signing: $0.kid == signing) }))))
    }

    func retireSigningKey(_ input: Operations.RetireSigningKey.Input) async throws -> Operations.RetireSigningKey.Output {
        let kid = input.path.kid
        let key: SigningKey?
        do {
            key = try await store.retireSigningKey(kid, at: now())
        } catch .conflict {
            throw HTTPRequestError(
                RequestError(.keyLastSigningKey, "'\(kid)' is the only key that signs: make a new one first.")
            )
        } catch {
            throw HTTPRequestError(RequestError(error))
        }
        guard let key else { throw Self.noKey(kid) }
        try await storage { try await signingKeys.reload() }
        return .ok(.init(body: .json(Self.json(key, signing: false))))
    }

    static func json(_ key: SigningKey, signing: Bool) -> Components.Schemas.SigningKeyInfo {
        .init(kid: key.kid, createdAt: key.createdAt, retiresAt: key.retiresAt, signing: signing)
    }

    // MARK: Audit trail

    func listAuditEntries(_ input: Operations.ListAuditEntries.Input) async throws -> Operations.ListAuditEntries.Output {
        let query = input.query
        let limit = query.limit ?? 100
        guard (1...1000).contains(limit), (query.before ?? 1) >= 1, (query.since ?? 0) >= 0, (query.until ?? 0) >= 0 else {
            throw HTTPRequestError(.invalidArgument, "limit must be 1–1000, before at least 1, since and until at least 0.")
        }
        let rows = try await storage {
            try await store.auditEntries(
                AuditQuery(
                    credential: query.credential,
                    action: query.action,
                    since: query.since.map(Timestamp.init(milliseconds:)),
                    until: query.until.map(Timestamp.init(milliseconds:)),
                    before: query.before,
                    limit: limit
                )
            )
        }
        return .ok(
            .init(
                body: .json(
                    .init(
                        entries: rows.map {
                            .init(
                                seq: $0.seq,
                                at: $0.at,
                                credential: $0.credential,
                                action: $0.action,
                                target: $0.target,
                                requestId: $0.requestID,
                                clientAddress: $0.clientAddress,
                                status: $0.status,
                                code: $0.code.flatMap(Components.Schemas.ErrorCode.init(rawValue:))
                            )
                        },
                        nextBefore: rows.count == limit ? rows.last?.seq : nil
                    )
                )
            )
        )
    }
}
