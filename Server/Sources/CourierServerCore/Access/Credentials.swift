// Courier — Apache-2.0
internal import CourierDomain
package import CourierStorage
package import CourierWire
internal import Crypto
internal import Foundation
internal import HTTPTypes
internal import Logging

/// Who calls the REST API: the app secret (`root`, every operation) or an API key with its scopes (ADR 0048).
package struct Caller: Sendable, Equatable {
    /// `root`, or the key's id: what the audit trail and the request log name.
    package let credential: String
    /// `nil` for the app secret, which may do everything.
    let scopes: Set<Scope>?

    static let root = Caller(credential: "root", scopes: nil)
}

/// One REST request's caller, where it came from and its id: what the operation's scope check and audit row need.
package struct RESTCall: Sendable {
    package let caller: Caller
    let clientAddress: String?
    let requestID: String

    @TaskLocal package static var current: RESTCall?
}

/// Tells the app secret and API keys apart, checks them, and keeps recently checked keys for a few seconds so that a
/// busy backend costs no database read per request (a key revoked on another node is refused within
/// ``keyLifetime``; on this node at once).
package final class Credentials: Sendable {
    private let secret: AppSecret
    private let store: any CredentialStore
    private let now: @Sendable () -> Timestamp
    private let known = Locked<(keys: [String: (key: APIKey, checkedAt: ContinuousClock.Instant)], forgets: Int)>(([:], 0))

    /// How long a key read from the database is trusted before it is read again.
    static let keyLifetime = Duration.seconds(5)
    /// `ck_`, 16 hex digits of id, `_`, 64 of secret.
    static let prefix = "ck_"

    package init(secret: AppSecret, store: any CredentialStore, now: @escaping @Sendable () -> Timestamp) {
        self.secret = secret
        self.store = store
        self.now = now
    }

    /// The caller an `Authorization` header names.
    ///
    /// - Throws: 401 `auth.invalidSecret` for anything but the app secret or a live key (saying which check failed);
    ///   503 when a key cannot be read.
    func caller(authorization: String?) async throws -> Caller {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw Self.refused("") }
        let given = String(authorization.dropFirst("Bearer ".count))
        if Self.equalInConstantTime(Array(given.utf8), Array(secret.value.utf8)) { return .root }
        guard let (id, keySecret) = Self.parse(given) else { throw Self.refused("") }
        let key = try await self.key(id)
        guard let key, Self.equalInConstantTime(Array(Self.digest(keySecret).utf8), Array(key.secretDigest.utf8)) else {
            throw Self.refused("")
        }
        if let revoked = key.revokedAt, revoked <= now() { throw Self.refused(" The key was revoked.") }
        if let expires = key.expiresAt, expires <= now() { throw Self.refused(" The key has expired.") }
        return Caller(credential: key.id, scopes: Set(key.scopes.compactMap(Scope.init(rawValue:))))
    }

    /// Whether an `Authorization` header names the app secret or an API key (rather than a client token).
    package func isAppCredential(_ authorization: String) -> Bool {
        guard authorization.hasPrefix("Bearer ") else { return false }
        let given = authorization.dropFirst("Bearer ".count)
        return given.hasPrefix(Self.prefix) || Self.equalInConstantTime(Array(given.utf8), Array(secret.value.utf8))
    }

    /// Forgets what this node knows of `id` (it was revoked here).
    package func forget(_ id: String) {
        known.withLock {
            $0.keys[id] = nil
            $0.forgets += 1
        }
    }

    private func key(_ id: String) async throws -> APIKey? {
        let instant = ContinuousClock.now
        let (kept, forgets) = known.withLock { ($0.keys[id], $0.forgets) }
        if let kept, instant - kept.checkedAt < Self.keyLifetime { return kept.key }
        let key: APIKey?
        do {
            key = try await store.apiKey(id)
        } catch {
            throw HTTPRequestError(RequestError(error))
        }
        known.withLock { known in
            // A read that began before a revocation here may have read the key unrevoked: not kept.
            guard known.forgets == forgets else { return }
            // Bounded: a flood of made-up ids is not kept (they are not found), and real keys are few.
            if known.keys.count > 10_000 { known.keys.removeAll() }
            known.keys[id] = key.map { ($0, instant) }
        }
        return key
    }

    private static func refused(_ why: String) -> HTTPRequestError {
        HTTPRequestError(
            .authInvalidSecret,
            "The REST API needs 'Authorization: Bearer' with the app secret or an API key." + why,
            status: .unauthorized
        )
    }

    /// A new key: its record (the secret's digest only) and the credential shown once.
    package static func makeKey(
        name: String,
        scopes: [Scope],
        expiresAt: Timestamp?,
        createdBy: String,
        now: Timestamp
    ) -> (key: APIKey, credential: String) {
        let id = String.randomHex(bytes: 8)
        let secret = String.randomHex(bytes: 32)
        let key = APIKey(
            id: id,
            name: name,
            scopes: scopes.map(\.rawValue),
            secretDigest: digest(secret),
            createdAt: now,
            createdBy: createdBy,
            expiresAt: expiresAt
        )
        return (key, "\(prefix)\(id)_\(secret)")
    }

    /// The id and secret of `ck_<id>_<secret>`.
    static func parse(_ credential: String) -> (id: String, secret: String)? {
        guard credential.hasPrefix(prefix) else { return nil }
        let parts = credential.dropFirst(prefix.count).split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 16, parts[1].count == 64,
            parts.allSatisfy({ $0.allSatisfy(\.isHexDigit) })
        else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    static func digest(_ secret: String) -> String {
        SHA256.hash(data: Data(secret.utf8)).lowercaseHex
    }

    static func equalInConstantTime(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        zip(given, expected).reduce(given.count ^ expected.count) { $0 | Int($1.0 ^ $1.1) } == 0
    }
}

extension RESTCall {
    /// The call a route behind ``CallerMiddleware`` runs for (`route` names it in the log when there is none).
    package static func required(by route: String = "a route") throws -> RESTCall {
        guard let current else {
            throw HTTPRequestError(.internal, "The server failed; nothing was written.", status: .internalServerError,
                cause: "\(route) ran without a caller")
        }
        return current
    }
}
