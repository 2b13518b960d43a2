// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
internal import CourierWire
package import Logging
internal import ServiceLifecycle

/// Records this node's connections in the shared store (PostgreSQL), so that any node lists an account's devices on
/// every node. A connect records itself in the transaction that reads the account's status; the ends of
/// connections are written behind, in batches, by ``run()``, in the order they happen after their connects. When the
/// node stops it forgets its rows; when it dies, its rows drop out of every answer with its database connections.
package final class DevicePresence: Service, Sendable {
    package let store: any PresenceStore
    private let logger: Logger
    private let ended = Locked<[Int64]>([])
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation

    package init(store: any PresenceStore, logger: Logger) {
        self.store = store
        self.logger = logger
        (wakeUps, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Records that these connections ended (written behind).
    package func ended(_ connections: [ConnectionID]) {
        guard !connections.isEmpty else { return }
        ended.withLock { $0 += connections.map { Int64($0.rawValue) } }
        wakeUp.yield()
    }

    func run() async throws {
        // Nodes that died left rows; this node's own (written by connects already) stay.
        await forget(includingOwn: false)
        for await _ in wakeUps.cancelOnGracefulShutdown() {
            let batch = ended.withLock { batch in
                defer { batch = [] }
                return batch
            }
            do {
                try await store.recordDisconnected(batch)
            } catch {
                // Kept, and tried again in a second: a row left behind would list a device that is gone.
                ended.withLock { $0 = batch + $0 }
                logger.warning("Could not record ended connections", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
                wakeUp.yield()
            }
        }
        await forget(includingOwn: true)
    }

    private func forget(includingOwn: Bool) async {
        do {
            try await store.forgetConnections(includingOwn: includingOwn)
        } catch {
            logger.warning("Could not clear this node's connected devices", metadata: ["error": "\(error)"])
        }
    }
}
