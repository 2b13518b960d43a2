// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import Foundation
public import Logging
internal import NIOCore
internal import PostgresNIO

/// Listens for other nodes' changes on a dedicated connection (`LISTEN courier_changes`), reconnecting with backoff.
/// After every (re)connection it asks for a resync, because notifications sent while it was away are lost.
public struct PostgresChangeFeed: ChangeFeed {
    let url: PostgresURL
    let nodeID: String
    let logger: Logger
    /// Whether the LISTEN connection is up, shared by the feed's copies. Not `Mutex`: ThreadSanitizer sees this one's
    /// hand-offs.
    private let listening = Locked(false)

    public var isListening: Bool { listening.withLock { $0 } }

    /// - Parameters:
    ///   - url: The same database URL the store uses.
    ///   - nodeID: This node's id: its own notifications are skipped (it published those locally).
    public init(url: String, nodeID: String, logger: Logger) throws(PostgresURLError) {
        self.url = try PostgresURL(url)
        self.nodeID = nodeID
        self.logger = logger
    }

    public func run(
        onChange: @escaping @Sendable (ChangeNotice) async -> Void,
        onResync: @escaping @Sendable () async -> Void
    ) async throws {
        var failures = 0
        while !Task.isCancelled {
            do {
                // Notifications are not replicated: with several hosts, it listens on the primary.
                let (connection, _) = try await url.connectToPrimary(
                    applicationName: PostgresStore.applicationName(of: nodeID),
                    logger: logger
                )
                do {
                    // Waiting for a notification does not always observe cancellation; closing the connection
                    // always ends the wait.
                    try await withTaskCancellationHandler {
                        try await listen(on: connection, onChange: onChange, onResync: onResync)
                    } onCancel: {
                        _ = connection.close() as EventLoopFuture<Void>
                    }
                    failures = 0
                } catch {
                    try? await connection.close()  // dropping it anyway: a failure to close changes nothing
                    throw error
                }
                try? await connection.close()  // the listen ended; the next attempt opens a new connection
            } catch is CancellationError {
                return
            } catch is ChangeFeedOverflow {
                logger.warning("Change backlog full: reconnecting the listener; devices will sync")
                continue
            } catch {
                logger.warning("Change listener lost its connection", metadata: ["error.type": "\(type(of: error))"])
            }
            failures += 1
            try await Task.sleep(for: .milliseconds(min(100 << min(failures, 6), 5000)))
        }
    }

    private func listen(
        on connection: PostgresConnection,
        onChange: @escaping @Sendable (ChangeNotice) async -> Void,
        onResync: @escaping @Sendable () async -> Void
    ) async throws {
        defer { listening.withLock { $0 = false } }
        try await connection.listen(on: PostgresStore.channel) { notifications in
            logger.info("Listening for changes from other nodes")
            listening.withLock { $0 = true }
            await onResync()
            // PostgresNIO buffers notifications without bound: they are moved at once into a bounded queue, and the
            // slow side (reading each change's state) drains that. When it is full, changes would be lost: the
            // listener reconnects instead, and the reconnection makes every device sync.
            let (changes, queue) = AsyncStream.makeStream(
                of: ChangeNotice.self,
                bufferingPolicy: .bufferingOldest(Self.maxBacklog)
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // After an overflow the backlog is dropped, not drained: the devices sync instead.
                    for await change in changes {
                        guard !Task.isCancelled else { break }
                        await onChange(change)
                    }
                }
                defer { queue.finish() }
                // This node's own notifications (most of them on a busy node) are skipped before they are decoded:
                // `"origin":` and the id as JSON occur in a payload only as its origin (a quote inside a string is
                // escaped).
                let ownOrigin = Array(#""origin":"#.utf8) + (try JSONEncoder().encode(nodeID))
                for try await notification in notifications {
                    if notification.payload.utf8.contains(ownOrigin) { continue }
                    let change: ChangeNotice
                    do {
                        change = try JSONDecoder().decode(ChangeNotice.self, from: Data(notification.payload.utf8))
                    } catch {
                        // Another node's version may write what this one cannot read: its devices resync.
                        logger.warning("Undecodable change notification", metadata: ["error.type": "\(type(of: error))"])
                        await onResync()
                        continue
                    }
                    guard change.origin != nodeID else { continue }
                    if case .dropped = queue.yield(change) { throw ChangeFeedOverflow() }
                }
            }
        }
    }

    /// The most changes waiting to be fanned out before the feed gives up on them and asks devices to sync.
    static let maxBacklog = 10_000
}

/// The change feed's backlog passed ``PostgresChangeFeed/maxBacklog``: the listener reconnects and devices sync.
struct ChangeFeedOverflow: Error {}
