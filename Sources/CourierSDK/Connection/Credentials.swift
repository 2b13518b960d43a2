// Courier — Apache-2.0
internal import CourierWire

/// The token a client connects with: a fixed one, or one a provider renews when the server refuses or expires it.
final class Credentials: Sendable {
    /// How many fresh tokens in a row the server may refuse before the client stops (a provider that keeps minting bad
    /// tokens — a wrong secret, another account — must not spin).
    static let maximumRefusals = 3

    private let account: AccountID
    private let provider: CourierClient.TokenProvider?
    private let current: Locked<String?>

    init(token: String) {
        account = ""
        provider = nil
        current = Locked(token)
    }

    init(account: AccountID, provider: @escaping CourierClient.TokenProvider) {
        self.account = account
        self.provider = provider
        current = Locked(nil)
    }

    /// Whether a refused token can be replaced.
    var canRenew: Bool { provider != nil }

    /// The token to connect with: the current one, or a fresh one from the provider.
    func token() async throws -> String {
        if let token = current.withLock({ $0 }) { return token }
        guard let provider else { preconditionFailure("A fixed token is never expired") }
        let token = try await provider(account)
        current.withLock { $0 = token }
        return token
    }

    /// Forgets the current token, so the next connection asks the provider (a fixed token stays: the server will
    /// refuse it, and the client stop).
    func expire() {
        guard provider != nil else { return }
        current.withLock { $0 = nil }
    }
}
