// Courier — Apache-2.0
public import CourierServer
public import Logging
internal import ServiceLifecycle

/// A Courier node running inside the current process (its backend's services and the node in one service group),
/// started on the configured address and known to be listening once ``start(backend:configuration:logger:)``
/// returns. Used by `courier demo` and the tests; the executable runs the same parts under its own signal handling.
public final class EmbeddedNode: Sendable {
    /// The port it listens on (the configured one, or the one the system chose for port 0).
    public let port: Int
    public let backend: Backend
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(port: Int, backend: Backend, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.backend = backend
        self.group = group
        self.task = task
    }

    /// Starts the node and waits until it listens.
    ///
    /// - Throws: ``EmbeddedNodeError/didNotStart(_:)`` with the reason when it stops before listening.
    public static func start(
        backend: Backend,
        configuration: CourierServerConfiguration,
        logger: Logger
    ) async throws -> EmbeddedNode {
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let node = CourierNode(
            configuration: configuration,
            store: backend.store,
            changeFeed: backend.changeFeed,
            prepare: backend.prepare,
            logger: logger
        ) { port in portContinuation.yield(port) }
        let group = ServiceGroup(services: backend.services + [node], gracefulShutdownSignals: [], logger: logger)
        // The node's task tree: owned by the returned EmbeddedNode, ended by `stop()` or `kill()`.
        let task = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            do {
                try await task.value
                throw EmbeddedNodeError.didNotStart("the node stopped before listening")
            } catch let error as EmbeddedNodeError {
                throw error
            } catch {
                throw EmbeddedNodeError.didNotStart(String(describing: error))
            }
        }
        return EmbeddedNode(port: port, backend: backend, group: group, task: task)
    }

    /// Shuts the node down gracefully and waits until it has stopped.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    /// Stops the node abruptly (its task tree is cancelled): connected devices see their connection drop.
    public func kill() async {
        task.cancel()
        _ = try? await task.value
    }
}

public enum EmbeddedNodeError: Error, CustomStringConvertible {
    case didNotStart(String)

    public var description: String {
        switch self {
        case .didNotStart(let reason): "The server did not start: \(reason)."
        }
    }
}
