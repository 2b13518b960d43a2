// Courier — Apache-2.0
public import CourierWire
public import Foundation
internal import JWTKit

/// Mints and verifies client tokens: JWT, HS256, `sub` = account, `exp` required; signed with the signing key in use,
/// named by the header's `kid` (``SigningKeyRing``, ADR 0048), or — a token without `kid`, as before signing keys, and
/// when the server still accepts them — with the app secret. Verification
/// follows RFC 8725: the header's `alg` must be `HS256` (jwt-kit alone checks only the signature), a `crit` header is
/// refused (Courier understands no extension), `nbf` is honoured, and the times are checked with a documented leeway
/// and an optional maximum lifetime.
public struct TokenAuthority: Sendable {
    /// The app secret's key (tokens without `kid`).
    let keys: JWTKeyCollection
    let leeway: TimeInterval
    package let maxLifetime: TimeInterval?
    /// The signing keys; `nil` signs and verifies with the app secret alone (a harness without a store).
    let signing: SigningKeyRing?
    /// Whether a token without `kid` (signed with the app secret) is accepted.
    let acceptsAppSecretTokens: Bool

    /// - Parameters:
    ///   - leeway: Clock difference tolerated for `exp`, `nbf` and `iat` (default 60 s).
    ///   - maxLifetime: The longest lifetime a token may claim (`exp − iat`, or `exp − now` without `iat`); `nil`
    ///     for no limit.
    public init(secret: AppSecret, leeway: Duration = .seconds(60), maxLifetime: Duration? = nil) async {
        await self.init(secret: secret, leeway: leeway, maxLifetime: maxLifetime, signing: nil, acceptsAppSecretTokens: true)
    }

    package init(
        secret: AppSecret,
        leeway: Duration,
        maxLifetime: Duration?,
        signing: SigningKeyRing?,
        acceptsAppSecretTokens: Bool
    ) async {
        keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret.value), digestAlgorithm: .sha256)
        self.leeway = Double(leeway.components.seconds)
        self.maxLifetime = maxLifetime.map { Double($0.components.seconds) }
        self.signing = signing
        self.acceptsAppSecretTokens = acceptsAppSecretTokens
    }

    /// A token for `account`, valid for `lifetime`, signed with the signing key in use (its `kid` in the header); the
    /// same token an app's backend signs with that key.
    public func token(
        for account: AccountID,
        lifetime: Duration = .seconds(86_400 * 30),
        issuedAt: Date = Date()
    ) async throws -> String {
        let seconds = Double(lifetime.components.seconds)
        let claims = ClientTokenClaims(
            sub: SubjectClaim(value: account.rawValue),
            exp: ExpirationClaim(value: issuedAt.addingTimeInterval(seconds)),
            iat: IssuedAtClaim(value: issuedAt)
        )
        guard let signing else { return try await keys.sign(claims) }
        let key = try await signing.current()
        return try await key.keys.sign(claims, kid: JWKIdentifier(string: key.kid))
    }

    /// The account a token names, and until when it is valid.
    ///
    /// - Throws: `auth.invalidToken` (with a message saying which check failed) when it is malformed, names another
    ///   algorithm than HS256, carries `crit`, is badly signed, expired, not valid yet, too long-lived, or names an
    ///   invalid account.
    package func verify(_ token: String, now: Date = Date()) async throws(RequestError) -> VerifiedToken {
        let bytes = Array(token.utf8)
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(bytes, as: ClientTokenClaims.self).header
        } catch {
            throw RequestError(.authInvalidToken, "The token is not a valid client token for this server.")
        }
        guard header.alg == "HS256" else {
            throw RequestError(.authInvalidToken, "The token's header must name the algorithm HS256.")
        }
        guard !header.fields.keys.contains("crit") else {
            throw RequestError(.authInvalidToken, "The token has critical header parameters this server does not know.")
        }
        let verifier: JWTKeyCollection
        if let kid = header.kid {
            guard let key = await signing?.key(kid) else {
                throw RequestError(.authInvalidToken, "The token's signing key (kid) is unknown to this server or retired.")
            }
            verifier = key.keys
        } else {
            guard acceptsAppSecretTokens else {
                throw RequestError(.authInvalidToken, "The token names no signing key (kid): this server accepts only tokens signed with one.")
            }
            verifier = keys
        }
        let claims: ClientTokenClaims
        do {
            claims = try await verifier.verify(bytes, as: ClientTokenClaims.self)
        } catch {
            throw RequestError(.authInvalidToken, "The token is not a valid client token for this server.")
        }
        try check(claims, now: now)
        let account = AccountID(rawValue: claims.sub.value)
        guard account.isValid else {
            throw RequestError(.authInvalidToken, "The token's subject is not a valid account id.")
        }
        // The session lasts as long as a connect would still be accepted: `exp` plus the leeway.
        return VerifiedToken(
            account: account,
            expires: claims.exp.value.addingTimeInterval(leeway),
            issuedAt: claims.iat?.value
        )
    }

    /// The time claims, each with the leeway.
    private func check(_ claims: ClientTokenClaims, now: Date) throws(RequestError) {
        let expires = claims.exp.value
        guard now.addingTimeInterval(-leeway) < expires else {
            throw RequestError(.authInvalidToken, "The token has expired.")
        }
        if let notBefore = claims.nbf?.value, notBefore > now.addingTimeInterval(leeway) {
            throw RequestError(.authInvalidToken, "The token is not valid yet (nbf).")
        }
        if let issued = claims.iat?.value, issued > now.addingTimeInterval(leeway) {
            throw RequestError(.authInvalidToken, "The token was issued in the future (iat).")
        }
        if let maxLifetime {
            let lifetime = expires.timeIntervalSince(claims.iat?.value ?? now)
            guard lifetime <= maxLifetime + leeway else {
                throw RequestError(.authInvalidToken, "The token's lifetime exceeds this server's maximum.")
            }
        }
    }
}

/// A token that passed verification.
package struct VerifiedToken: Sendable {
    package let account: AccountID
    /// When a session authenticated with it must end: `exp` plus the leeway (a connect is accepted until then).
    package let expires: Date
    /// Its `iat`, if it has one (a revocation refuses tokens issued before a time).
    package var issuedAt: Date? = nil
}

struct ClientTokenClaims: JWTPayload {
    var sub: SubjectClaim
    /// Required: a token without `exp` does not decode.
    var exp: ExpirationClaim
    var iat: IssuedAtClaim?
    var nbf: NotBeforeClaim?

    /// The time checks need the server's clock and leeway: ``TokenAuthority`` makes them after decoding.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
