// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import Logging
internal import PostgresNIO

extension PostgresStore {
    /// The schema this build migrates to (`courier-server --version`).
    public static var schemaVersion: Int { PostgresSchema.migrations.last?.version ?? 0 }

    /// Creates or upgrades the schema. Safe to run from several nodes at once (an advisory lock serializes them).
    /// Answers the schema it found (`nil`: a new database) and the one it left, or `nil` when there was nothing to do;
    /// a refusal (a newer schema) is thrown as itself, one clear line, not wrapped in the transaction's error. A
    /// database it cannot reach within three connect timeouts (a database still starting gets that long) is
    /// ``StorageError/unreachable(_:)`` with its cause (``diagnose()``).
    @discardableResult
    public func migrate() async throws -> (from: Int?, to: Int)? {
        // With several hosts, the first that is a primary (a standby listed first takes no writes).
        if clients.count > 1 { _ = await findPrimary() }
        do {
            let (client, logger) = (self.client, self.logger)
            return try await leasing(within: timeouts.connect * 3) { leased in
                try await client.withTransaction(logger: logger) { connection in
                    leased(connection)
                    return try await Self.runMigrations(on: connection, logger: logger)
                }
            }
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? StorageError { throw refusal }
            throw await diagnosed(Self.storageError(error))
        } catch let error as StorageError {
            throw await diagnosed(error)
        } catch {
            throw await diagnosed(Self.storageError(error))
        }
    }

    private static func runMigrations(
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> (from: Int?, to: Int)? {
        // A migration may rewrite a large table: not bounded by the store's statement_timeout.
        try await connection.query("SET LOCAL statement_timeout = 0", logger: logger)
        try await connection.query("SELECT pg_advisory_xact_lock(7460211)", logger: logger)
        try await connection.query(
            "CREATE TABLE IF NOT EXISTS courier_migration (version INT PRIMARY KEY)",
            logger: logger
        )
        let applied = try await connection.query("SELECT version FROM courier_migration", logger: logger)
            .decode(Int.self).reduce(into: Set<Int>()) { $0.insert($1) }
        // A database a newer build migrated is refused (see SQLiteStore): downgrading is restoring a backup.
        let known = Set(PostgresSchema.migrations.map(\.version))
        if let newer = applied.subtracting(known).max() {
            throw StorageError.newerSchema(found: String(newer), known: String(known.max() ?? 0))
        }
        let pending = PostgresSchema.migrations.filter { !applied.contains($0.version) }
        for (version, statements) in pending {
            for statement in statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await connection.query(
                "INSERT INTO courier_migration (version) VALUES (\(version))",
                logger: logger
            )
        }
        return pending.isEmpty ? nil : (applied.max(), Self.schemaVersion)
    }
}

enum PostgresSchema {
    /// The migrations in version order: each runs once, with the others still to run, in the transaction that holds
    /// the migration lock, and is recorded in `courier_migration`; a new one goes at the end of the list and of the
    /// file.
    static let migrations: [(version: Int, statements: [String])] = [
        (1, v1), (2, v2), (3, v3), (4, v4), (5, v5), (6, v6), (7, v7), (8, v8), (9, v9), (10, v10), (11, v11),
        (12, v12), (13, v13), (14, v14), (15, v15), (16, v16), (17, v17), (18, v18), (19, v19), (20, v20), (21, v21),
        (22, v22), (23, v23), (24, v24), (25, v25), (26, v26), (27, v27), (28, v28),
        (29, v29),
    ]

    /// Accounts, conversations and their logs, and each member's receipts (SQLite's v1).
    static let v1: [String] = [
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

    /// Read receipts: `receipt.read_*` is the shared position (what peers see), `own_read_*` the reader's own
    /// (private reads included); `read_ack` holds the few messages above a watermark read one by one; the read-receipt
    /// settings (SQLite's v2).
    static let v2: [String] = [
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

    /// Replies and recall: `recall` holds a recall notice's JSON (the entry is part of the log, with its own seq);
    /// `recalled` marks a tombstone (body erased); `counts_unread` is false for tombstones and for notices not
    /// counted (SQLite's v3).
    static let v3: [String] = [
        "ALTER TABLE message ADD COLUMN reply_to TEXT",
        "ALTER TABLE message ADD COLUMN quote TEXT",
        "ALTER TABLE message ADD COLUMN recall TEXT",
        "ALTER TABLE message ADD COLUMN recalled BOOLEAN NOT NULL DEFAULT FALSE",
        "ALTER TABLE message ADD COLUMN counts_unread BOOLEAN NOT NULL DEFAULT TRUE",
        "CREATE INDEX message_by_reply_to ON message (reply_to) WHERE reply_to IS NOT NULL",
    ]

    /// Groups and group read receipts: the same tables as SQLite's v4 (see Schema.v4 there).
    static let v4: [String] = [
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

    /// Receipt lists and member pages are ordered and paged by account: byte order, as in SQLite, whatever
    /// the database's locale (the index order, the cursors and the server's own comparisons agree).
    static let v5: [String] = [
        "ALTER TABLE conversation_member ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
        "ALTER TABLE receipt ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
        "ALTER TABLE read_ack ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
        "ALTER TABLE former_member ALTER COLUMN account TYPE TEXT COLLATE \"C\"",
    ]

    /// What a one-way recall erased for everyone else, kept for the sender's account alone (SPEC §6).
    static let v6: [String] = [
        """
        CREATE TABLE sender_copy (
            message_id TEXT PRIMARY KEY,
            sender TEXT NOT NULL,
            body TEXT NOT NULL,
            quote TEXT
        )
        """
    ]

    /// What a message's body holds; NULL for text (SQLite v6).
    static let v7: [String] = ["ALTER TABLE message ADD COLUMN type TEXT"]

    /// One push token per device; a token belongs to one device (SQLite v7).
    static let v8: [String] = [
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

    /// Webhook endpoints and deliveries (SQLite v8). `seq` orders deliveries per endpoint and conversation:
    /// log entries are recorded under the conversation's row lock, so their seqs follow its log; reads and
    /// deliveries of a direct conversation take no such lock and are numbered as they write.
    static let v9: [String] = [
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

    /// The seq of a dismissed group's last entry; NULL while the group exists (SQLite v9).
    static let v10: [String] = ["ALTER TABLE conversation ADD COLUMN dismissed_seq BIGINT"]

    /// Finished webhook deliveries by when they finished, for pruning (SQLite v10).
    static let v11: [String] = [
        "CREATE INDEX webhook_delivery_delivered ON webhook_delivery (delivered_at) WHERE state = 'delivered'",
        "CREATE INDEX webhook_delivery_failed ON webhook_delivery (next_attempt_at) WHERE state = 'failed'",
    ]

    /// Change stamps (ADR 0017, SQLite v11): the id of the transaction that last changed a conversation's log,
    /// an entry or a receipt row. Transaction ids do not follow commit order across sessions, so the cursor
    /// handed out is the oldest transaction still running (`changeCursor`). `change_clock` names this database.
    static let v12: [String] = [
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

    /// A group's membership version (ADR 0023, SQLite v12): the seq of its newest membership change; the stamp
    /// of a membership's end, for sync; read notes (the table was `ack_content`).
    static let v13: [String] = [
        "ALTER TABLE ack_content RENAME TO read_note",
        "ALTER TABLE former_member ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX former_member_by_account ON former_member (account, stamp)",
        "ALTER TABLE conversation ADD COLUMN membership_seq BIGINT NOT NULL DEFAULT 0",
        """
        UPDATE conversation SET membership_seq = COALESCE((SELECT max(seq) FROM message
            WHERE message.conversation_id = conversation.id AND message.group_change IS NOT NULL), 0)
        WHERE kind = 'group'
        """,
    ]

    /// What readiness writes (SQLite v13): one row whose counter every probe moves, a real write; moderation:
    /// when an account was deactivated, and before when its tokens are refused; when an endpoint was paused.
    static let v14: [String] = [
        "CREATE TABLE health_probe (id INT PRIMARY KEY CHECK (id = 1), probes BIGINT NOT NULL)",
        "INSERT INTO health_probe (id, probes) VALUES (1, 0)",
        "ALTER TABLE account ADD COLUMN deactivated_at BIGINT",
        "ALTER TABLE account ADD COLUMN tokens_revoked_at BIGINT",
        "ALTER TABLE webhook_endpoint ADD COLUMN paused_at BIGINT",
    ]

    /// A recall or a purge finds the webhook deliveries that carry what it erases by conversation and time
    /// (SQLite v14, ADR 0028); which devices are connected to which node (`connected_device`: rows of a node
    /// whose connections are gone from `pg_stat_activity` are ignored, then removed).
    static let v15: [String] = [
        "CREATE INDEX webhook_delivery_by_time ON webhook_delivery (conversation_id, created_at)",
        """
        CREATE TABLE connected_device (
            node TEXT NOT NULL,
            connection BIGINT NOT NULL,
            account TEXT NOT NULL,
            device TEXT NOT NULL,
            connected_at BIGINT NOT NULL,
            PRIMARY KEY (node, connection)
        )
        """,
        "CREATE INDEX connected_device_by_account ON connected_device (account)",
    ]

    /// A message's `ext`; an account's own view of a conversation (SQLite v15, ADR 0029).
    static let v16: [String] = [
        "ALTER TABLE message ADD COLUMN ext TEXT",
        "ALTER TABLE sender_copy ADD COLUMN ext TEXT",
        """
        CREATE TABLE conversation_view (
            conversation_id TEXT NOT NULL,
            account TEXT NOT NULL,
            cleared_seq BIGINT NOT NULL DEFAULT 0,
            muted BIGINT NOT NULL DEFAULT 0,
            pinned_at BIGINT NOT NULL DEFAULT 0,
            stamp BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, account)
        )
        """,
        """
        CREATE TABLE deleted_message (
            conversation_id TEXT NOT NULL,
            account TEXT NOT NULL,
            seq BIGINT NOT NULL,
            PRIMARY KEY (conversation_id, account, seq)
        )
        """,
    ]

    /// The event log every endpoint reads with its own cursor (SQLite v16, ADR 0030): positions begin after the
    /// deliveries recorded before it, so a delivery's number stays unique.
    static let v17: [String] = [
        """
        CREATE TABLE webhook_event (
            position BIGSERIAL PRIMARY KEY,
            stamp BIGINT NOT NULL,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            message_id TEXT,
            created_at BIGINT NOT NULL,
            payload TEXT NOT NULL
        )
        """,
        "CREATE INDEX webhook_event_order ON webhook_event (stamp, position)",
        "CREATE INDEX webhook_event_by_message ON webhook_event (message_id) WHERE message_id IS NOT NULL",
        """
        SELECT setval('webhook_event_position_seq',
            (SELECT coalesce(max(seq), 0) FROM webhook_delivery) + 1, false)
        """,
        """
        ALTER TABLE webhook_endpoint ADD COLUMN cursor_stamp BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN cursor_position BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN cursor_lease_until BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN start_stamp BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN start_position BIGINT NOT NULL DEFAULT 0
        """,
        "ALTER TABLE webhook_delivery ADD COLUMN event_position BIGINT",
        """
        CREATE INDEX webhook_delivery_by_event ON webhook_delivery (event_position)
        WHERE event_position IS NOT NULL
        """,
        "CREATE INDEX webhook_delivery_by_position ON webhook_delivery (endpoint_id, coalesce(event_position, seq))",
    ]

    /// How far each import source got (SQLite v17, ADR 0031).
    static let v18: [String] = [
        """
        CREATE TABLE import_progress (
            source TEXT PRIMARY KEY,
            lines BIGINT NOT NULL,
            digest TEXT NOT NULL,
            updated_at BIGINT NOT NULL
        )
        """,
    ]

    /// Files stored by Courier (SQLite v18, ADR 0032).
    static let v19: [String] = [
        """
        CREATE TABLE media (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            uploader TEXT,
            content_type TEXT NOT NULL,
            size BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            state BIGINT NOT NULL
        )
        """,
        "CREATE INDEX media_by_state ON media (state, created_at)",
    ]

    /// Webhook batches (SQLite v19, ADR 0041).
    static let v20: [String] = ["ALTER TABLE webhook_endpoint ADD COLUMN batch_size BIGINT NOT NULL DEFAULT 0"]

    /// API keys, signing keys and the audit trail (SQLite v21, ADR 0048).
    static let v21: [String] = [
        """
        CREATE TABLE api_key (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            scopes TEXT NOT NULL,
            secret_sha256 TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            created_by TEXT NOT NULL,
            expires_at BIGINT,
            revoked_at BIGINT
        )
        """,
        """
        CREATE TABLE signing_key (
            kid TEXT PRIMARY KEY,
            secret TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            retires_at BIGINT
        )
        """,
        """
        CREATE TABLE audit_entry (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            at BIGINT NOT NULL,
            credential TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            request_id TEXT NOT NULL,
            client_address TEXT,
            status BIGINT,
            code TEXT
        )
        """,
        "CREATE INDEX audit_entry_by_time ON audit_entry (at)",
    ]

    /// Whether an account's typing is shown to others (SQLite v22, ADR 0050).
    static let v22: [String] = ["ALTER TABLE account ADD COLUMN send_typing_indicators BOOLEAN NOT NULL DEFAULT true"]

    /// A conversation hidden from the account's list up to a seq (SQLite v23).
    static let v23: [String] = ["ALTER TABLE conversation_view ADD COLUMN hidden_seq BIGINT NOT NULL DEFAULT 0"]

    /// A group's profile (SQLite v24, ADR 0051).
    static let v24: [String] = [
        "ALTER TABLE conversation ADD COLUMN group_name TEXT",
        "ALTER TABLE conversation ADD COLUMN group_avatar TEXT",
        "ALTER TABLE conversation ADD COLUMN group_announcement TEXT",
        "ALTER TABLE conversation ADD COLUMN group_ext TEXT",
    ]

    /// An account's profile and the stamp of its last change (SQLite v25, ADR 0053).
    static let v25: [String] = [
        "ALTER TABLE account ADD COLUMN display_name TEXT",
        "ALTER TABLE account ADD COLUMN avatar TEXT",
        "ALTER TABLE account ADD COLUMN profile_ext TEXT",
        "ALTER TABLE account ADD COLUMN profile_stamp BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE account ADD COLUMN profile_updated_at BIGINT",
        "CREATE INDEX account_by_profile_stamp ON account (profile_stamp, id) WHERE profile_stamp > 0",
    ]

    /// Edits: the message an edit entry edits, and the message's latest version's time (SQLite v26, ADR 0054).
    static let v26: [String] = [
        "ALTER TABLE message ADD COLUMN edit TEXT",
        "ALTER TABLE message ADD COLUMN edit_of TEXT",
        "ALTER TABLE message ADD COLUMN edited_at BIGINT",
        "CREATE INDEX message_by_edit_of ON message (edit_of) WHERE edit_of IS NOT NULL",
    ]

    /// Reactions: a row per account and reaction, a count per reaction, the version of a message's reactions
    /// (SQLite v27, ADR 0055).
    static let v27: [String] = [
        """
        CREATE TABLE reaction (
            message_id TEXT NOT NULL,
            reaction TEXT NOT NULL,
            account TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            time BIGINT NOT NULL,
            PRIMARY KEY (message_id, reaction, account)
        )
        """,
        "CREATE INDEX reaction_by_account ON reaction (message_id, account)",
        """
        CREATE TABLE reaction_count (
            message_id TEXT NOT NULL,
            reaction TEXT NOT NULL,
            total BIGINT NOT NULL,
            PRIMARY KEY (message_id, reaction)
        )
        """,
        "ALTER TABLE message ADD COLUMN reaction_version BIGINT NOT NULL DEFAULT 0",
    ]

    /// A parked delivery is retried by its endpoint's stream, under the stream's lease (SQLite v28, ADR 0059).
    static let v28: [String] = ["ALTER TABLE webhook_delivery DROP COLUMN lease_until"]

    /// A reader's kept unread count (ADR 0042, SQLite v20): `unread_count` entries of others that count as unread in
    /// `(unread_from, unread_to]`, facts of the log alone, moved along by the next read (``MarkReadProcedure``, one
    /// read for both backends since this version).
    static let v29: [String] = [
        """
        ALTER TABLE receipt ADD COLUMN unread_from BIGINT, ADD COLUMN unread_to BIGINT, ADD COLUMN unread_count BIGINT
        """
    ]
}
