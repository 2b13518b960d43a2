// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
internal import CourierWire
package import Foundation

/// What an account's status means for its devices (deactivation and revoked tokens), the same at a connect
/// and for the sessions already open, on every node.
extension AccountStatus {
    /// Why a connect with a token issued at `tokenIssuedAt` is refused now; `nil` when it is not. A token without
    /// `iat` counts as issued before any revocation.
    package func refusal(tokenIssuedAt: Date?) -> RequestError? {
        if deactivatedAt != nil {
            return RequestError(.authAccountDeactivated, "This account is deactivated.")
        }
        if let revoked = tokensRevokedAt, (tokenIssuedAt.map { $0 < Self.revocationSecond(revoked) } ?? true) {
            return RequestError(.authTokenRevoked, "This token was revoked: connect with a new one.")
        }
        return nil
    }

    /// A revocation counts from the start of its second: tokens issued in that second still count. (Many JWT
    /// libraries write `iat` in whole seconds: a token minted just after a revocation, in the same second, would
    /// otherwise be refused.)
    static func revocationSecond(_ revoked: Timestamp) -> Date {
        Date(timeIntervalSince1970: Double(revoked.rawValue / 1000))
    }

    /// Ends the sessions on this node that this status no longer allows. Answers how many.
    @discardableResult
    package func endSessions(in registry: ConnectionRegistry) -> Int {
        if deactivatedAt != nil { return registry.end(account, for: .accountDeactivated) }
        guard let revoked = tokensRevokedAt else { return 0 }
        return registry.end(account, for: .tokenRevoked, issuedBefore: Self.revocationSecond(revoked))
    }
}
