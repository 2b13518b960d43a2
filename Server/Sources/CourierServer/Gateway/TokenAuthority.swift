// Courier — Apache-2.0
public import CourierWire
internal import Foundation
internal import JWTKit

/// Mints and verifies client tokens: JWT, HS256 with the app secret, `sub` = account, `exp` required.
public struct TokenAuthority: Sendable {
    let keys: JWTKeyCollection

    public init(secret: AppSecret) async {
        keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret.value), digestAlgorithm: .sha256)
    }

    /// A token for `account`, valid for `lifetime`. The same token an app's backend mints with the secret.
    public func token(for account: AccountID, lifetime: Duration = .seconds(86_400 * 30)) async throws -> String {
        let seconds = Double(lifetime.components.seconds)
        let claims = ClientTokenClaims(
            sub: SubjectClaim(value: account.rawValue),
            exp: ExpirationClaim(value: Date().addingTimeInterval(seconds)),
            iat: IssuedAtClaim(value: Date())
        )
        return try await keys.sign(claims)
    }

    /// The account a token names.
    ///
    /// - Throws: `auth.invalidToken` when it is malformed, badly signed, expired, or names an invalid account.
    func verify(_ token: String) async throws(RequestError) -> AccountID {
        let claims: ClientTokenClaims
        do {
            claims = try await keys.verify(token, as: ClientTokenClaims.self)
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            throw RequestError(.authInvalidToken, "The token has expired.")
        } catch {
            throw RequestError(.authInvalidToken, "The token is not a valid client token for this server.")
        }
        let account = AccountID(rawValue: claims.sub.value)
        guard account.isValid else {
            throw RequestError(.authInvalidToken, "The token's subject is not a valid account id.")
        }
        return account
    }
}

struct ClientTokenClaims: JWTPayload {
    var sub: SubjectClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim?

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}
