// Courier — Apache-2.0
package import CourierDomain
package import CourierStorage
package import CourierWire
internal import Foundation
internal import JWTKit

/// The keys that sign client tokens (ADR 0048), as the database has them, kept by each node: read at the first need,
/// again every ``refreshInterval``, and at once (at most once per ``missInterval``) when a token names a key this node
/// does not know, so that a key made on another node verifies here at once and an early retirement takes effect
/// within the interval.
package final class SigningKeyRing: Sendable {
    package struct Key: Sendable {
        let kid: String
        let createdAt: Timestamp
        let retiresAt: Timestamp?
        let keys: JWTKeyCollection
    }

    private struct State {
        var keys: [String: Key] = [:]
        var loadedAt: ContinuousClock.Instant?
        var missedAt: ContinuousClock.Instant?
        /// Reads of the database begun, and the one whose keys are installed: a read that finishes after a later one
        /// never installs its older list.
        var reads = 0
        var installed = 0
    }

    private let store: any CredentialStore
    private let now: @Sendable () -> Timestamp
    private let state = Locked(State())

    static let refreshInterval = Duration.seconds(30)
    static let missInterval = Duration.seconds(1)

    package init(store: any CredentialStore, now: @escaping @Sendable () -> Timestamp) {
        self.store = store
        self.now = now
    }

    /// The key that signs now: the newest without a retirement time (made here if the database has none yet).
    package func current() async throws(StorageError) -> Key {
        try await refreshIfStale()
        if let key = signing() { return key }
        // No key signs: the first start of a database (another node may make one at the same moment: both sign).
        let read = beginRead()
        await install(try await store.ensureSigningKey(Self.make(now: now())), read: read)
        guard let key = signing() else { throw .failed("No signing key could be made.") }
        return key
    }

    /// The key `kid` names if it verifies tokens now (known and not retired), reading the database again when this
    /// node does not know it.
    func key(_ kid: String) async -> Key? {
        try? await refreshIfStale()
        if state.withLock({ $0.keys[kid] }) == nil {
            let instant = ContinuousClock.now
            let read = state.withLock { state -> Bool in
                guard state.missedAt.map({ instant - $0 >= Self.missInterval }) ?? true else { return false }
                state.missedAt = instant
                return true
            }
            if read { try? await reload() }
        }
        guard let key = state.withLock({ $0.keys[kid] }) else { return nil }
        if let retiresAt = key.retiresAt, retiresAt <= now() { return nil }
        return key
    }

    /// A new key (a `kid` of 8 hex digits, a secret of 32 random bytes).
    package static func make(now: Timestamp) -> SigningKey {
        SigningKey(kid: "k" + String.randomHex(bytes: 4), secret: String.randomHex(bytes: 32), createdAt: now)
    }

    /// Reads the database's keys and takes them (a change made through this node: at once).
    package func reload() async throws(StorageError) {
        let read = beginRead()
        await install(try await store.signingKeys(), read: read)
    }

    private func beginRead() -> Int {
        state.withLock {
            $0.reads += 1
            return $0.reads
        }
    }

    /// Takes `records`, the keys as read `read`, unless a later read's are installed already. Retired keys are left
    /// out: they verify nothing.
    private func install(_ records: [SigningKey], read: Int) async {
        var keys: [String: Key] = [:]
        let instant = now()
        for record in records where record.retiresAt.map({ $0 > instant }) ?? true {
            let collection = await JWTKeyCollection().add(
                hmac: HMACKey(from: record.secret),
                digestAlgorithm: .sha256,
                kid: JWKIdentifier(string: record.kid)
            )
            keys[record.kid] = Key(kid: record.kid, createdAt: record.createdAt, retiresAt: record.retiresAt, keys: collection)
        }
        state.withLock {
            guard read > $0.installed else { return }
            $0.installed = read
            $0.keys = keys
            $0.loadedAt = ContinuousClock.now
        }
    }

    private func signing() -> Key? {
        state.withLock { state in
            state.keys.values.filter { $0.retiresAt == nil }.max { ($0.createdAt, $0.kid) < ($1.createdAt, $1.kid) }
        }
    }

    private func refreshIfStale() async throws(StorageError) {
        let instant = ContinuousClock.now
        let stale = state.withLock { state -> Bool in
            guard state.loadedAt.map({ instant - $0 >= Self.refreshInterval }) ?? true else { return false }
            // Marked now: the requests meanwhile use what is known rather than each reading again.
            if state.loadedAt != nil { state.loadedAt = instant }
            return true
        }
        if stale { try await reload() }
    }
}
