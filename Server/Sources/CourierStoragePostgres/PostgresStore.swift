// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
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
    let client: PostgresClient
    let durability: Durability
    let logger: Logger
    /// This node's id, stamped on its notifications so that its own feed skips them.
    public let nodeID: String
    /// Told of every transaction (one operation each) and its latency (`courier_commit_*` metrics).
    public let commits = CommitObserver()
    static let channel = "courier_changes"

    /// - Parameters:
    ///   - url: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]`.
    ///   - nodeID: This node's id (random by default).
    ///   - durability: `full` (the default): a commit is acknowledged once PostgreSQL has flushed its WAL
    ///     (`synchronous_commit=on` on every connection, whatever the server's default). `normal`:
    ///     `synchronous_commit=off`, faster; a crash of the database server may lose the last commits.
    public init(url: String, nodeID: String? = nil, durability: Durability = .full, logger: Logger) throws {
        let nodeID = nodeID ?? UUID().uuidString
        var configuration = try PostgresURL(url).clientConfiguration(
            durability: durability,
            applicationName: Self.applicationName(of: nodeID)
        )
        configuration.options.maximumConnections = 40
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
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
            var values: [String] = []
            for name in ["synchronous_commit", "fsync"] {
                let rows = try await connection.query("SELECT current_setting(\(name))", logger: logger)
                for try await value in rows.decode(String.self) { values.append(value) }
            }
            return (values.first ?? "", values.dropFirst().first ?? "")
        }
    }

    /// Refuses to serve when `synchronous_commit` did not take on the store's connections (a pooler that drops
    /// startup parameters), and warns when the server runs with `fsync=off`.
    public func checkDurability() async throws {
        let settings = try await durabilitySettings()
        guard settings.synchronousCommit == durability.synchronousCommit else {
            throw StorageError.unavailable(
                "synchronous_commit is \(settings.synchronousCommit) on the store's connections, expected "
                    + "\(durability.synchronousCommit) (a connection pooler may drop startup parameters)"
            )
        }
        if settings.fsync != "on" {
            logger.warning("PostgreSQL runs with fsync=off: acknowledged writes do not survive a power loss")
        }
    }

    public func run() async throws {
        await client.run()
    }

    /// Creates or upgrades the schema. Safe to run from several nodes at once (an advisory lock serializes them).
    public func migrate() async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7460211)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS courier_migration (version INT PRIMARY KEY)",
                logger: logger
            )
            let applied = try await connection.query("SELECT version FROM courier_migration", logger: logger)
                .decode(Int.self).reduce(into: Set<Int>()) { $0.insert($1) }
            for (version, statements) in PostgresSchema.migrations where !applied.contains(version) {
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO courier_migration (version) VALUES (\(version))",
                    logger: logger
                )
            }
        }
    }

    /// Runs `body` in a transaction, mapping failures to ``StorageError``.
    func transaction<T: Sendable>(
        _ body: (PostgresConnection) async throws -> sending T
    ) async throws(StorageError) -> T {
        let started = ContinuousClock.now
        defer { commits.record(operations: 1, duration: ContinuousClock.now - started) }
        do {
            return try await client.withTransaction(logger: logger, body)
        } catch {
            throw Self.storageError(error)
        }
    }

    /// What a PostgresNIO failure means to the server: a domain error thrown by our own code, a lost uniqueness race
    /// (SQLSTATE 23505), or an unavailable database.
    static func storageError(_ error: any Error) -> StorageError {
        switch error {
        case let error as StorageError: return error
        case let error as PostgresTransactionError:
            return error.closureError.map(storageError) ?? .unavailable(String(reflecting: error))
        case let error as PSQLError where error.serverInfo?[.sqlState] == "23505": return .conflict
        default: return .unavailable(String(reflecting: error))
        }
    }

    /// A pooled session on a primary (not in recovery) whose transactions are not read-only.
    public func checkWritable() async throws(StorageError) {
        let writable = try await withPooledConnection { connection in
            try await connection.query(
                "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
                logger: logger
            ).decode(Bool.self).first { _ in true } ?? false
        }
        guard writable else { throw .unavailable("The database takes no writes (a standby, or read-only).") }
    }

    /// Runs `body` on a pooled connection where a single statement writes and commits on its own (counted as a
    /// commit, as ``transaction(_:)`` counts one).
    func autocommit<T: Sendable>(
        _ body: (PostgresConnection) async throws -> sending T
    ) async throws(StorageError) -> T {
        let started = ContinuousClock.now
        defer { commits.record(operations: 1, duration: ContinuousClock.now - started) }
        return try await withPooledConnection(body)
    }

    /// Runs `body` on a pooled connection, outside a transaction (each statement commits on its own).
    func withPooledConnection<T: Sendable>(
        _ body: (PostgresConnection) async throws -> sending T
    ) async throws(StorageError) -> T {
        do {
            return try await client.withConnection(body)
        } catch {
            throw Self.storageError(error)
        }
    }

    /// What a change tells others, in the caller's transaction and one round trip: `changes` to the other nodes
    /// (notifications PostgreSQL delivers when, and only if, the transaction commits) and `events` to the webhook
    /// endpoints that want them (one pending delivery per endpoint and event, ``WebhookStore``). It locks the
    /// endpoints it records for (`FOR KEY SHARE`, as a foreign key's check would; a secret's rotation does not wait
    /// for it): an endpoint being deleted meanwhile is waited for and then skipped, and a deletion that comes after
    /// waits for this transaction and then deletes what it recorded (``deleteWebhookEndpoint(_:)``). No delivery
    /// outlives its endpoint.
    func publish(_ changes: [StoreChange], events: [WebhookEventDraft], on connection: PostgresConnection) async throws {
        guard !changes.isEmpty || !events.isEmpty else { return }
        let publishedAt = Self.now()
        let payloads = try changes.map { try notificationPayload($0, publishedAt: publishedAt) }
        _ = try await connection.run(
            Publish.self,
            .of(
                events.map(\.id), events.map(\.type.rawValue), events.map(\.conversation.rawValue),
                events.map(\.time.rawValue), events.map(\.payload), Self.channel, payloads
            ),
            logger: logger
        )
    }

    /// `change` as the other nodes read it, stamped with when it was published (for the cross-node lag metric).
    func notificationPayload(_ change: StoreChange, publishedAt: Int64 = PostgresStore.now()) throws -> String {
        var change = change
        change.publishedAt = publishedAt
        return String(decoding: try JSONEncoder().encode(change), as: UTF8.self)
    }

    /// Microseconds since 1970.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }

    /// Whether endpoint `e` subscribed to events of the type in `type` (every type but `message.undelivered`, or
    /// the comma-separated list it names).
    static func endpointWants(_ type: String) -> String {
        "((e.events = '*' AND \(type) <> 'message.undelivered') OR \(type) = ANY(string_to_array(e.events, ',')))"
    }

    enum Publish: HotStatement {
        static let sql = """
            WITH recorded AS (
                INSERT INTO webhook_delivery (endpoint_id, event_id, type, conversation_id, created_at, payload,
                    next_attempt_at)
                SELECT e.id, v.event_id, v.type, v.conversation_id, v.created_at, v.payload, v.created_at
                FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[])
                    WITH ORDINALITY AS v(event_id, type, conversation_id, created_at, payload, n)
                JOIN webhook_endpoint e ON \(endpointWants("v.type"))
                ORDER BY v.n, e.id
                FOR KEY SHARE OF e
            )
            SELECT pg_notify($6, p.payload) FROM unnest($7::text[]) WITH ORDINALITY AS p(payload, n) ORDER BY p.n
            """
    }
}

enum PostgresSchema {
    static let migrations: [(Int, [String])] = [
        (
            1,
            [
                "CREATE TABLE account (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL)",
                """
                CREATE TABLE conversation (
                    id TEXT PRIMARY KEY,
                    kind TEXT NOT NULL CHECK (kind IN ('direct', 'group')),
                    last_seq BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
                    last_time BIGINT NOT NULL DEFAULT 0
                )
                """,
                """
                CREATE TABLE conversation_member (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    account TEXT NOT NULL REFERENCES account(id),
                    PRIMARY KEY (conversation_id, account)
                )
                """,
                "CREATE INDEX conversation_member_by_account ON conversation_member (account, conversation_id)",
                """
                CREATE TABLE message (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    seq BIGINT NOT NULL CHECK (seq > 0),
                    id TEXT NOT NULL UNIQUE,
                    sender TEXT NOT NULL REFERENCES account(id),
                    client_id TEXT NOT NULL,
                    time BIGINT NOT NULL,
                    body TEXT NOT NULL,
                    PRIMARY KEY (conversation_id, seq),
                    UNIQUE (sender, client_id)
                )
                """,
                """
                CREATE TABLE receipt (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    account TEXT NOT NULL REFERENCES account(id),
                    delivered_seq BIGINT NOT NULL DEFAULT 0 CHECK (delivered_seq >= 0),
                    delivered_time BIGINT NOT NULL DEFAULT 0,
                    read_seq BIGINT NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
                    read_time BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (conversation_id, account)
                )
                """,
            ]
        ),
        (
            2,
            [
                "ALTER TABLE receipt ADD COLUMN own_read_seq BIGINT NOT NULL DEFAULT 0 CHECK (own_read_seq >= 0)",
                "ALTER TABLE receipt ADD COLUMN own_read_time BIGINT NOT NULL DEFAULT 0",
                "UPDATE receipt SET own_read_seq = read_seq, own_read_time = read_time",
                """
                CREATE TABLE read_ack (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    account TEXT NOT NULL REFERENCES account(id),
                    seq BIGINT NOT NULL CHECK (seq > 0),
                    shared BOOLEAN NOT NULL,
                    PRIMARY KEY (conversation_id, account, seq)
                )
                """,
                """
                CREATE TABLE read_setting (
                    account TEXT NOT NULL REFERENCES account(id),
                    conversation_id TEXT NOT NULL DEFAULT '',
                    send_read_receipts BOOLEAN NOT NULL,
                    PRIMARY KEY (account, conversation_id)
                )
                """,
            ]
        ),
        (
            3,
            [
                "ALTER TABLE message ADD COLUMN reply_to TEXT",
                "ALTER TABLE message ADD COLUMN quote TEXT",
                "ALTER TABLE message ADD COLUMN recall TEXT",
                "ALTER TABLE message ADD COLUMN recalled BOOLEAN NOT NULL DEFAULT FALSE",
                "ALTER TABLE message ADD COLUMN counts_unread BOOLEAN NOT NULL DEFAULT TRUE",
                "CREATE INDEX message_by_reply_to ON message (reply_to) WHERE reply_to IS NOT NULL",
            ]
        ),
        (
            // Groups and group read receipts: the same tables as SQLite's v4 (see Schema.v4 there).
            4,
            [
                "ALTER TABLE conversation ADD COLUMN member_count BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE conversation_member ADD COLUMN role TEXT NOT NULL DEFAULT 'member'",
                "ALTER TABLE conversation_member ADD COLUMN joined_seq BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE receipt ADD COLUMN read_at BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE receipt ADD COLUMN delivered_at BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE read_ack ADD COLUMN time BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE message ADD COLUMN needs_receipt BOOLEAN NOT NULL DEFAULT FALSE",
                "ALTER TABLE message ADD COLUMN group_change TEXT",
                "ALTER TABLE message ADD COLUMN receipt_request TEXT",
                "CREATE INDEX receipt_by_read ON receipt (conversation_id, read_seq, account)",
                "CREATE INDEX receipt_by_delivered ON receipt (conversation_id, delivered_seq, account)",
                """
                CREATE TABLE receipt_count (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    seq BIGINT NOT NULL,
                    message_id TEXT NOT NULL,
                    sender TEXT NOT NULL,
                    audience BIGINT NOT NULL CHECK (audience >= 0),
                    read_count BIGINT NOT NULL CHECK (read_count >= 0),
                    PRIMARY KEY (conversation_id, seq)
                )
                """,
                """
                CREATE TABLE former_member (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    account TEXT NOT NULL,
                    joined_seq BIGINT NOT NULL,
                    left_seq BIGINT NOT NULL,
                    read_seq BIGINT NOT NULL,
                    read_at BIGINT NOT NULL,
                    acks TEXT NOT NULL,
                    PRIMARY KEY (conversation_id, account, joined_seq)
                )
                """,
                """
                CREATE TABLE ack_content (
                    conversation_id TEXT NOT NULL REFERENCES conversation(id),
                    seq BIGINT NOT NULL,
                    account TEXT NOT NULL,
                    content TEXT NOT NULL,
                    PRIMARY KEY (conversation_id, seq, account)
                )
                """,
            ]
        ),
        (
            // Receipt lists and member pages are ordered and paged by account: byte order, as in SQLite, whatever
            // the database's locale (the index order, the cursors and the server's own comparisons agree).
            5,
            [
                "ALTER TABLE conversation_member ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
                "ALTER TABLE receipt ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
                "ALTER TABLE read_ack ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
                "ALTER TABLE former_member ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
            ]
        ),
        (
            // What a one-way recall erased for everyone else, kept for the sender's account alone (SPEC §6).
            6,
            [
                """
                CREATE TABLE sender_copy (
                    message_id TEXT PRIMARY KEY,
                    sender TEXT NOT NULL,
                    body TEXT NOT NULL,
                    quote TEXT
                )
                """
            ]
        ),
        (
            // What a message's body holds; NULL for text (SQLite v6).
            7,
            ["ALTER TABLE message ADD COLUMN type TEXT"]
        ),
        (
            // One push token per device; a token belongs to one device (SQLite v7).
            8,
            [
                """
                CREATE TABLE push_token (
                    account TEXT NOT NULL,
                    device TEXT NOT NULL,
                    platform TEXT NOT NULL,
                    token TEXT NOT NULL,
                    sandbox BOOLEAN NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (account, device),
                    UNIQUE (platform, token)
                )
                """
            ]
        ),
        (
            // Webhook endpoints and deliveries (SQLite v8). `seq` orders deliveries per endpoint and conversation:
            // log entries are recorded under the conversation's row lock, so their seqs follow its log; reads and
            // deliveries of a direct conversation take no such lock and are numbered as they write.
            9,
            [
                """
                CREATE TABLE webhook_endpoint (
                    id TEXT PRIMARY KEY,
                    url TEXT NOT NULL,
                    events TEXT NOT NULL,
                    secret TEXT NOT NULL,
                    previous_secret TEXT,
                    previous_secret_expires_at BIGINT,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE webhook_delivery (
                    seq BIGSERIAL PRIMARY KEY,
                    endpoint_id TEXT NOT NULL,
                    event_id TEXT NOT NULL,
                    type TEXT NOT NULL,
                    conversation_id TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    payload TEXT NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at BIGINT NOT NULL,
                    expires_at BIGINT,
                    lease_until BIGINT NOT NULL DEFAULT 0,
                    last_status INTEGER,
                    last_error TEXT,
                    delivered_at BIGINT
                )
                """,
                """
                CREATE INDEX webhook_delivery_queue ON webhook_delivery (endpoint_id, conversation_id, seq)
                WHERE state = 'pending'
                """,
                "CREATE INDEX webhook_delivery_due ON webhook_delivery (next_attempt_at) WHERE state = 'pending'",
                "CREATE INDEX webhook_delivery_by_endpoint ON webhook_delivery (endpoint_id, seq)",
            ]
        ),
        (
            // The seq of a dismissed group's last entry; NULL while the group exists (SQLite v9).
            10,
            ["ALTER TABLE conversation ADD COLUMN dismissed_seq BIGINT"]
        ),
        (
            // Finished webhook deliveries by when they finished, for pruning (SQLite v10).
            11,
            [
                "CREATE INDEX webhook_delivery_delivered ON webhook_delivery (delivered_at) WHERE state = 'delivered'",
                "CREATE INDEX webhook_delivery_failed ON webhook_delivery (next_attempt_at) WHERE state = 'failed'",
            ]
        ),
        (
            // Change stamps (ADR 0017, SQLite v11): the id of the transaction that last changed a conversation's log,
            // an entry or a receipt row. Transaction ids do not follow commit order across sessions, so the cursor
            // handed out is the oldest transaction still running (`changeCursor`). `change_clock` names this database.
            12,
            [
                "ALTER TABLE conversation ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE message ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE receipt ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0",
                """
                CREATE FUNCTION change_stamp() RETURNS BIGINT LANGUAGE sql VOLATILE
                AS 'SELECT pg_current_xact_id()::text::bigint'
                """,
                "CREATE TABLE change_clock (store_id TEXT NOT NULL)",
                "INSERT INTO change_clock (store_id) VALUES (substr(md5(random()::text || clock_timestamp()::text), 1, 16))",
            ]
        ),
    ]
}

extension PostgresStore: StoreHealth, StoreObservation {}
