// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import CourierWire
internal import Foundation
public import Logging
internal import PostgresNIO
public import ServiceLifecycle

/// The scale-out store: several server nodes share one PostgreSQL database.
///
/// Every invariant is enforced inside the transaction by the database, never by a node: the conversation row lock
/// serializes appends (gapless seq), unique indexes make sends idempotent, and watermark updates only move forward.
/// Each write also issues `NOTIFY courier_changes` in its transaction, so other nodes hear of it only after commit.
///
/// Run it as a `Service` (its `run()` runs the connection pool) before anything queries it.
public struct PostgresStore: Service {
    /// One pool per host of the URL (a primary and its standbys); requests go to ``client``, the one that was last
    /// found to be the primary (``findPrimary()``).
    let clients: [PostgresClient]
    /// The index in ``clients`` of the primary.
    let primary = Locked(0)
    /// Whether a search for the primary runs (started by ``failure(_:)``): one at a time.
    let searching = Locked(false)
    /// The pool of the host last found to be the primary.
    var client: PostgresClient { clients[primary.withLock { $0 }] }
    let durability: Durability
    let timeouts: Timeouts
    /// Where the database is: a single connection of its own tells why the pool cannot reach it (``diagnose()``).
    let location: PostgresURL
    /// The last cause ``diagnose()`` logged, so that a database that stays down is logged once per cause.
    let loggedCause = Locked<String?>(nil)
    /// Whether the last wait for a connection ran out, and no connection was leased since: the next waits are short
    /// (``leasing(within:_:)``), so that requests queued behind one another (a conversation's appends, batch after
    /// batch) do not each wait the whole timeout for a database that is down.
    let waitRanOut = Locked(false)
    /// The pool's leases and whether the database was last reached (``connectionStatistics``), kept by
    /// ``leasing(within:_:)``.
    let leases = Locked(ConnectionStatistics(reachable: true, pool: .init()))
    /// The database's identity as this node last read it (``noticeIdentity(_:)``).
    let knownIdentity = Locked<String?>(nil)
    let logger: Logger
    /// This node's id, stamped on its notifications so that its own feed skips them.
    public let nodeID: String
    /// Told of every transaction (one operation each, a batch of direct messages one per message) and its latency
    /// (`courier_commit_*` metrics).
    public let commits = CommitObserver()
    /// Direct messages of many devices, written by one transaction per batch (``appendDirectMessage(_:)``).
    let directAppends = Coalescer<DirectAppend, BatchOutcome<AppendOutcome>>(
        maxBatch: maxBatch,
        concurrency: batchesAtOnce,
        apart: DirectAppend.apart
    )
    /// The last seq of each direct conversation this node's batches wrote or read, by conversation id: where the next
    /// batch plans its appends (``appendDirectMessage(_:)``). Stale when another node or path appended since, which
    /// the batch's statement finds out.
    let knownHeads = Locked<[String: Int64]>([:])
    /// Direct chats' deliveries of many devices, written by one statement per batch (``advanceDirectDelivered(_:in:to:at:)``).
    let directDeliveries = Coalescer<DirectDelivery, BatchOutcome<Void>>(
        maxBatch: maxBatch,
        concurrency: batchesAtOnce,
        apart: DirectDelivery.apart
    )
    /// Direct chats' reads of many devices, in one transaction per batch (``markRead(_:)``).
    let directReads = Coalescer<ResolvedRead, BatchOutcome<Result<ReadOutcome, StorageError>>>(
        maxBatch: maxBatch,
        concurrency: batchesAtOnce,
        apart: { $0.conversation == $1.conversation && $0.reader == $1.reader }
    )
    /// Direct messages waiting for a batch (tests).
    package var queuedDirectAppends: Int { directAppends.queuedCount }
    /// Direct chats' deliveries waiting for a batch (tests).
    package var queuedDirectDeliveries: Int { directDeliveries.queuedCount }
    /// Direct chats' reads waiting for a batch (tests).
    package var queuedDirectReads: Int { directReads.queuedCount }
    static let channel = "courier_changes"

    /// - Parameters:
    ///   - url: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]`.
    ///   - nodeID: This node's id (random by default).
    ///   - durability: `full` (the default): a commit is acknowledged once PostgreSQL has flushed its WAL
    ///     (`synchronous_commit=on` on every connection, whatever the server's default). `normal`:
    ///     `synchronous_commit=off`, faster; a crash of the database server may lose the last commits.
    ///   - timeouts: How long to wait for the database (``Timeouts``).
    public init(
        url: String,
        nodeID: String? = nil,
        durability: Durability = .full,
        timeouts: Timeouts = .standard,
        logger: Logger
    ) throws {
        let nodeID = nodeID ?? UUID().uuidString
        let location = try PostgresURL(url)
        self.location = location
        self.clients = try location.endpoints.map { endpoint in
            var configuration = try location.clientConfiguration(
                of: endpoint,
                durability: durability,
                applicationName: Self.applicationName(of: nodeID)
            )
            configuration.options.maximumConnections = 40
            configuration.options.connectTimeout = timeouts.connect
            configuration.options.additionalStartupParameters.append(
                ("statement_timeout", String(timeouts.statement.components.seconds * 1000))
            )
            return PostgresClient(configuration: configuration, backgroundLogger: logger)
        }
        self.timeouts = timeouts
        self.nodeID = nodeID
        self.durability = durability
        self.logger = logger
    }

    /// The `application_name` of a node's connections (`pg_stat_activity`, the server's log with `%a`): which node
    /// holds a connection or ran a statement. At most 63 bytes, as PostgreSQL keeps, cut between characters.
    public static func applicationName(of nodeID: String) -> String {
        var name = "courier-\(nodeID)"
        while name.utf8.count > 63 { name.removeLast() }
        return name
    }

    /// How hard a commit waits for the disk.
    public enum Durability: String, Sendable, Hashable, CaseIterable {
        /// `synchronous_commit=on`: an acknowledged write survives a crash of PostgreSQL or of its machine.
        case full
        /// `synchronous_commit=off`: faster; a crash may lose the last commits (never corrupts).
        case normal

        var synchronousCommit: String { self == .full ? "on" : "off" }
    }

    /// The durability settings in force on the store's own (pooled) connections: `synchronous_commit` as this
    /// store set it, and the server-wide `fsync` (without which no commit survives a power loss).
    public func durabilitySettings() async throws -> (synchronousCommit: String, fsync: String) {
        try await client.withConnection { connection in
            let rows = try await connection.query(
                "SELECT current_setting('synchronous_commit'), current_setting('fsync')",
                logger: logger
            )
            for try await settings in rows.decode((String, String).self) { return settings }
            return ("", "")
        }
    }

    /// Refuses to serve when `synchronous_commit` did not take on the store's connections (a pooler that drops
    /// startup parameters), and warns when the server runs with `fsync=off`.
    public func checkDurability() async throws {
        let settings = try await durabilitySettings()
        guard settings.synchronousCommit == durability.synchronousCommit else {
            throw StorageError.failed(
                "synchronous_commit is \(settings.synchronousCommit) on the store's connections, expected "
                    + "\(durability.synchronousCommit) (a connection pooler may drop startup parameters)"
            )
        }
        if settings.fsync != "on" {
            logger.warning("PostgreSQL runs with fsync=off: acknowledged writes do not survive a power loss")
        }
    }

    public func run() async throws {
        // A standby's pool opens no connection until it is the primary's.
        await withDiscardingTaskGroup { group in
            for client in clients { group.addTask { await client.run() } }
        }
    }

    /// Runs `body` in a transaction, mapping failures to ``StorageError``.
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(StorageError) -> T {
        let started = ContinuousClock.now
        defer { commits.record(operations: 1, duration: ContinuousClock.now - started) }
        let (client, logger) = (self.client, self.logger)
        // An administrative action's row goes in the transaction of its first write (ADR 0048).
        let audit = AuditTrail.pending
        do {
            let value = try await leasing { leased in
                try await client.withTransaction(logger: logger) { connection in
                    leased(connection)
                    let value = try await body(connection)
                    if let audit { _ = try await connection.rows(AuditEntry.upsert(audit, status: nil, code: nil), logger: logger) }
                    return value
                }
            }
            audit?.markRecorded()
            return value
        } catch {
            throw failure(error)
        }
    }

    /// What a PostgresNIO failure means to the server: a domain error thrown by our own code, a lost uniqueness race
    /// (SQLSTATE 23505), a database that cannot be reached (``unreachableCause(of:)``), or a failed one.
    static func storageError(_ error: any Error) -> StorageError {
        if let cause = unreachableCause(of: error) { return .unreachable(cause) }
        switch error {
        case let error as StorageError: return error
        case let error as PostgresTransactionError:
            if let failure = error.closureError ?? error.beginError ?? error.commitError {
                return storageError(failure)
            }
            return .failed(String(reflecting: error))
        case let error as PSQLError where error.serverInfo?[.sqlState] == "23505": return .conflict
        default: return .failed(String(reflecting: error))
        }
    }

    /// A pooled session on a primary (not in recovery) whose transactions are not read-only, with a schema this
    /// build knows: a node whose database another node migrated further while it ran turns unready, and
    /// says why, rather than serve requests against tables it was not written for.
    public func checkWritable() async throws(StorageError) {
        do {
            try await probeWritable()
        } catch {
            throw await diagnosed(error)
        }
    }

    private func probeWritable() async throws(StorageError) {
        let logger = self.logger
        let (writable, schema) = try await withPooledConnection { connection in
            try await connection.query(
                """
                SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off',
                    (SELECT coalesce(max(version), 0) FROM courier_migration)
                """,
                logger: logger
            ).decode((Bool, Int).self).first { _ in true } ?? (false, 0)
        }
        guard writable else { throw .unreachable("The database takes no writes (a standby, or read-only).") }
        guard schema <= Self.schemaVersion else {
            throw .newerSchema(found: String(schema), known: String(Self.schemaVersion), whileRunning: true)
        }
        // A real write, committed on its own (its WAL flushed like any commit): a full disk or a session that cannot
        // write fails it. (Every node's probe moves the same row: they wait for each other, briefly.)
        try await withPooledConnection { connection in
            _ = try await connection.query("UPDATE health_probe SET probes = probes + 1", logger: logger)
        }
    }

    /// Runs `body` on a pooled connection where a single statement writes and commits on its own (counted as a
    /// commit, as ``transaction(_:)`` counts one).
    func autocommit<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(StorageError) -> T {
        let started = ContinuousClock.now
        defer { commits.record(operations: 1, duration: ContinuousClock.now - started) }
        return try await withPooledConnection(body)
    }

    /// Runs `body` on a pooled connection, outside a transaction (each statement commits on its own).
    func withPooledConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(StorageError) -> T {
        let client = self.client
        do {
            return try await leasing { leased in
                try await client.withConnection { connection in
                    leased(connection)
                    return try await body(connection)
                }
            }
        } catch {
            throw failure(error)
        }
    }

    /// What a change tells others, in the caller's transaction and one round trip: the other nodes (notifications
    /// PostgreSQL delivers when, and only if, the transaction commits) and the event log (its webhook events, once
    /// each when some endpoint wants its type; ``WebhookStore``, ADR 0030). An event's stamp is at least its
    /// conversation's: an append took the transaction id before it waited for the conversation's row, so a later
    /// transaction id may have appended before it; the conversation's stamp, which only grows, keeps the log's order.
    func announce(_ change: Change?, on connection: PostgresConnection) async throws {
        guard let change else { return }
        let events = change.webhookEvents
        let payloads = try notificationPayloads(change)
        guard !payloads.isEmpty || !events.isEmpty else { return }
        _ = try await connection.run(
            Announce.self,
            .of(
                events.map(\.id), events.map(\.type.rawValue), events.map(\.conversation.rawValue),
                events.map(\.time.rawValue), events.map(\.payload), Self.channel, payloads,
                events.map { $0.messageID?.rawValue ?? "" }
            ),
            logger: logger
        )
    }

    /// `change` as the other nodes read it, stamped with when it was published (for the cross-node lag metric): whole
    /// when it fits a notification, else its compact notices (``ChangeNotice/compact``). None for a change no other
    /// node acts on (``Change/concernsOtherNodes``).
    func notificationPayloads(_ change: Change, publishedAt: Int64 = PostgresStore.now()) throws -> [String] {
        guard change.concernsOtherNodes else { return [] }
        return try notificationPayloads(ChangeNotice(change, origin: nodeID), publishedAt: publishedAt)
    }

    func notificationPayloads(_ notice: ChangeNotice, publishedAt: Int64 = PostgresStore.now()) throws -> [String] {
        var notice = notice
        notice.publishedAt = publishedAt
        let full = String(decoding: try JSONEncoder().encode(notice), as: UTF8.self)
        guard full.utf8.count > Self.maxNotificationBytes else { return [full] }
        return try notice.compact.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
    }

    /// PostgreSQL's limit on a notification's payload is 8,000 bytes.
    static let maxNotificationBytes = 7_900

    /// Microseconds since 1970.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }

    /// Whether endpoint `e` subscribed to events of the type in `type` (``WebhookEndpoint/wants(_:events:)``).
    static func endpointWants(_ type: String) -> String { WebhookEndpoint.wants(type, events: "e.events") }

    enum Announce: HotStatement {
        static let sql = """
            WITH recorded AS (
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT GREATEST(change_stamp(), coalesce((SELECT c.stamp FROM conversation c
                        WHERE c.id = regexp_replace(v.conversation_id, '^push:', '')), 0)),
                    v.event_id, v.type, v.conversation_id, NULLIF(v.message_id, ''), v.created_at, v.payload
                FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $8::text[])
                    WITH ORDINALITY AS v(event_id, type, conversation_id, created_at, payload, message_id, n)
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint e WHERE \(endpointWants("v.type")))
                ORDER BY v.n
            )
            SELECT pg_notify($6, p.payload) FROM unnest($7::text[]) WITH ORDINALITY AS p(payload, n) ORDER BY p.n
            """
    }
}

extension PostgresStore: StoreHealth, StoreObservation {
    public var connectionStatistics: ConnectionStatistics { leases.withLock { $0 } }
}
