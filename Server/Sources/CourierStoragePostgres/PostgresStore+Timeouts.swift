// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import PostgresNIO
internal import _ConnectionPoolModule
internal import CourierWire

extension PostgresStore {
    /// How long the store waits for PostgreSQL. A database that is down, failing over or refusing
    /// connections is answered for within `acquire` (``StorageError/unreachable(_:)``, `store.unavailable` on the
    /// wire), not after the pool's own backoff of about a minute.
    public struct Timeouts: Sendable, Hashable {
        /// A new connection: TCP, TLS and authentication (`--database-connect-timeout-seconds`).
        public var connect: Duration
        /// Waiting for a connection of the pool when none is free and none can be made
        /// (`--database-timeout-seconds`). Once an operation has its connection it runs to its end.
        public var acquire: Duration
        /// PostgreSQL's `statement_timeout` on the store's connections (`--database-statement-timeout-seconds`):
        /// a statement stuck behind a lock, or a runaway one, is cancelled by the server. Migrations run without it.
        public var statement: Duration

        public init(
            connect: Duration = .seconds(3),
            acquire: Duration = .seconds(2),
            statement: Duration = .seconds(120)
        ) {
            self.connect = connect
            self.acquire = acquire
            self.statement = statement
        }

        public static let standard = Timeouts()
        /// For tests that share a slow machine (ThreadSanitizer slows a node tenfold): a burst that keeps every
        /// connection of the pool busy for seconds is load there, not a database that is down.
        public static let patient = Timeouts(connect: .seconds(10), acquire: .seconds(60), statement: .seconds(600))
    }

    /// Runs `operation`, which leases a connection of the pool and calls `leased` with it, and gives up with
    /// ``StorageError/unreachable(_:)`` when it has none within `wait` (the lease is cancelled, nothing was sent to the
    /// database). By default `timeouts.acquire`, or at most half a second while the last wait ran out (or the last
    /// connection closed under its operation) and nothing was leased since (the pool goes on making connections
    /// meanwhile: the first that succeeds ends it). Once it has its connection the operation runs to its end —
    /// bounded by `statement_timeout` — unless the connection closes under it: a statement in flight when the
    /// database went away may never be answered, so that too is ``StorageError/unreachable(_:)``, found within a
    /// quarter of a second after the wait.
    func leasing<T: Sendable>(
        within wait: Duration? = nil,
        _ operation: @escaping @Sendable (_ leased: @escaping @Sendable (PostgresConnection) -> Void) async throws -> T
    ) async throws -> T {
        let ranOut = waitRanOut
        let acquire = wait ?? (ranOut.withLock { $0 } ? min(timeouts.acquire, .milliseconds(500)) : timeouts.acquire)
        let leased = Locked<PostgresConnection?>(nil)
        let outcome = LeaseRace<T>()
        // The operation runs in a task of its own, so that the answer at the deadline never waits for it: a lease
        // request the pool is slow to give up (cancelled while it makes a connection) must not hold the request.
        let leases = self.leases
        leases.withLock { $0.pool?.waiting += 1 }
        let work = Task {
            do {
                let value = try await operation { connection in
                    leased.withLock { $0 = connection }
                    ranOut.withLock { $0 = false }
                    leases.withLock {
                        $0.pool?.waiting -= 1
                        $0.pool?.inUse += 1
                        $0.reachable = true
                    }
                }
                outcome.finish(.success(value))
            } catch {
                // A connection that closed under the operation: the database most likely went away, so the next
                // lease waits no longer than after a wait that ran out (the request is retried alone on another).
                if leased.withLock({ $0?.isClosed ?? false }) {
                    ranOut.withLock { $0 = true }
                    leases.withLock { $0.reachable = false }
                }
                outcome.finish(.failure(error))
            }
            let hadConnection = leased.withLock { $0 != nil }
            leases.withLock {
                if hadConnection { $0.pool?.inUse -= 1 } else { $0.pool?.waiting -= 1 }
            }
        }
        let timer = Task {
            try await Task.sleep(for: acquire)
            guard let connection = leased.withLock({ $0 }) else {
                ranOut.withLock { $0 = true }
                leases.withLock {
                    $0.pool?.timeouts += 1
                    $0.reachable = false
                }
                let setting = wait == nil ? " (--database-timeout-seconds)" : ""
                outcome.finish(.failure(StorageError.unreachable("No database connection within \(acquire)\(setting).")))
                work.cancel()
                return
            }
            // Leased: the operation runs to its end, unless its connection closes under it (the database went away
            // mid-statement: PostgresNIO may then never answer the statement).
            while !connection.isClosed { try await Task.sleep(for: .milliseconds(250)) }
            ranOut.withLock { $0 = true }
            leases.withLock { $0.reachable = false }
            outcome.finish(.failure(StorageError.unreachable("The database connection closed before it answered.")))
            work.cancel()
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await outcome.value()
        } onCancel: {
            work.cancel()
        }
    }

    /// Why the database cannot be reached, from one connection of its own made as the pool makes them (the pool
    /// keeps the cause of its failed attempts to itself: a lease only learns that none could be made). `nil` when
    /// that connection succeeds. A new cause is logged at `error` (`Database unreachable`, with `cause`), once.
    func diagnose() async -> String? {
        let cause = await findPrimary()
        let isNew = loggedCause.withLock { logged in
            defer { logged = cause }
            return cause != nil && cause != logged
        }
        if isNew, let cause { logger.error("Database unreachable", metadata: ["cause": "\(cause)"]) }
        return cause
    }

    /// `nil` when a connection of its own reaches the primary, which becomes the one requests go to (with several
    /// hosts: the first, from the current one on, that is not in recovery); why not otherwise.
    func findPrimary() async -> String? {
        let current = primary.withLock { $0 }
        do {
            let (connection, found) = try await location.connectToPrimary(
                from: current,
                applicationName: Self.applicationName(of: nodeID),
                connectTimeout: timeouts.connect,
                logger: logger
            )
            try? await connection.close()
            if found != current {
                primary.withLock { $0 = found }
                logger.notice(
                    "Database primary changed: requests go to \(location.endpoints[found])",
                    metadata: ["database.primary": "\(location.endpoints[found])"]
                )
            }
            return nil
        } catch {
            return Self.unreachableCause(of: error) ?? String(describing: error)
        }
    }

    /// What a failure of a request means (``storageError(_:)``). When the database could not be reached and the URL
    /// names several hosts, the primary is looked for again in the background (``findPrimary()``, one search at a
    /// time), so that the next requests go to a standby promoted meanwhile; this one is answered at once.
    func failure(_ error: any Error) -> StorageError {
        let failure = Self.storageError(error)
        guard case .unreachable = failure, clients.count > 1 else { return failure }
        let starts = searching.withLock { running in
            defer { running = true }
            return !running
        }
        if starts {
            Task {
                _ = await diagnose()
                searching.withLock { $0 = false }
            }
        }
        return failure
    }

    /// `error`, with the cause ``diagnose()`` finds when the database could not be reached.
    func diagnosed(_ error: StorageError) async -> StorageError {
        guard case .unreachable(let reason) = error, let cause = await diagnose() else { return error }
        return .unreachable("\(reason) \(cause)")
    }

    /// Whether a PostgresNIO failure means the database cannot be reached (or not now) rather than that it refused
    /// the request, and why, in words an operator acts on.
    static func unreachableCause(of error: any Error) -> String? {
        if let error = error as? PostgresURL.NoPrimary { return error.description }
        if let error = error as? ConnectionPoolError {
            return switch error {
            case .connectionCreationCircuitBreakerTripped:
                "No connection to the database could be made (the pool gave up after repeated failures)."
            case .poolShutdown: "The store's connection pool is shut down."
            default: "The database connection request was cancelled: \(error)."
            }
        }
        guard let error = error as? PSQLError else { return nil }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            let underlying = error.underlying.map { ": \(String(describing: $0))" } ?? ""
            return "The database connection failed or was closed (\(error.code))\(underlying)."
        case .sslUnsupported:
            return "The database does not accept TLS, and the URL asks for it (sslmode=require)."
        case .failedToAddSSLHandler, .receivedUnencryptedDataAfterSSLRequest:
            return "TLS with the database failed (\(error.code))."
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            let message = error.serverInfo?[.message] ?? ""
            // 08: connection exceptions; 57P01–57P03: shutting down, crash recovery, starting up; 53300: too many
            // connections; 25006: a read-only transaction (a standby, or a primary demoted by a failover); 57014: the
            // statement_timeout.
            guard state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300", "25006", "57014"].contains(state) else {
                return nil
            }
            return "The database refused the request for now (SQLSTATE \(state): \(message))."
        default:
            return nil
        }
    }
}

/// The first of an operation's result and its deadline (``PostgresStore/leasing(within:_:)``): whoever finishes first
/// answers; the other's finish is ignored.
private final class LeaseRace<T: Sendable>: Sendable {
    private let state = Locked<(result: Result<T, any Error>?, waiter: CheckedContinuation<T, any Error>?)>((nil, nil))

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let result = state.withLock { state -> Result<T, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
