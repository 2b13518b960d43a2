// Courier — Apache-2.0
package import CourierStorage
package import CourierWire
package import Logging
internal import ServiceLifecycle

/// Deletes audit rows older than `--audit-retention-days`, at start and every hour after (ADR 0048). Every node does
/// it; a delete that finds nothing costs an index lookup.
package struct AuditRetention: Service {
    let store: any CredentialStore
    let keep: Duration
    let now: @Sendable () -> Timestamp
    let logger: Logger

    package init(store: any CredentialStore, keep: Duration, now: @escaping @Sendable () -> Timestamp, logger: Logger) {
        self.store = store
        self.keep = keep
        self.now = now
        self.logger = logger
    }

    static let interval = Duration.seconds(3600)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let cutoff = Timestamp(milliseconds: now().rawValue - Int64(keep.components.seconds) * 1000)
                do {
                    let deleted = try await store.pruneAudit(before: cutoff)
                    if deleted > 0 { logger.info("Audit rows past their retention deleted", metadata: ["rows": "\(deleted)"]) }
                } catch {
                    logger.warning("Audit rows past their retention could not be deleted", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: Self.interval)
            }
        }
    }
}
