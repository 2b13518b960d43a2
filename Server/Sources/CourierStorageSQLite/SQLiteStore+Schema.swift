// Courier — Apache-2.0
internal import GRDB

extension SQLiteStore {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // In version order; each runs once, in its own transaction, and is recorded by name.
        for (name, sql) in Schema.migrations {
            migrator.registerMigration(name) { db in try db.execute(sql: sql) }
        }
        return migrator
    }
}

/// The SQLite schema: its migrations in order, each once with what it is for. Each runs once, in its own
/// transaction, recorded by its name; a new one goes at the end of the list and of the file.
enum Schema {
    static let migrations: [(name: String, sql: String)] = [
        ("v1", v1), ("v2", v2), ("v3", v3), ("v4", v4), ("v5", v5), ("v6", v6), ("v7", v7), ("v8", v8), ("v9", v9),
        ("v10", v10), ("v11", v11), ("v12", v12), ("v13", v13), ("v14", v14), ("v15", v15), ("v16", v16),
        ("v17", v17), ("v18", v18), ("v19", v19), ("v20", v20), ("v21", v21),
        ("v22", v22), ("v23", v23), ("v24", v24), ("v25", v25), ("v26", v26), ("v27", v27),
        ("v28", v28),
    ]

    /// Accounts, conversations and their logs, and each member's delivered watermark.
    static let v1 = """
        CREATE TABLE account (
            id TEXT PRIMARY KEY NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE conversation (
            id TEXT PRIMARY KEY NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('direct', 'group')),
            last_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
            last_time INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE conversation_member (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL REFERENCES account(id),
            PRIMARY KEY (conversation_id, account)
        ) WITHOUT ROWID;
        CREATE INDEX conversation_member_by_account ON conversation_member(account, conversation_id);
        CREATE TABLE message (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            seq INTEGER NOT NULL CHECK (seq > 0),
            id TEXT NOT NULL UNIQUE,
            sender TEXT NOT NULL REFERENCES account(id),
            client_id TEXT NOT NULL,
            time INTEGER NOT NULL,
            body TEXT NOT NULL,
            UNIQUE (conversation_id, seq),
            UNIQUE (sender, client_id)
        );
        CREATE TABLE receipt (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL REFERENCES account(id),
            delivered_seq INTEGER NOT NULL DEFAULT 0 CHECK (delivered_seq >= 0),
            delivered_time INTEGER NOT NULL DEFAULT 0,
            read_seq INTEGER NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
            read_time INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, account)
        ) WITHOUT ROWID;
        """

    /// Read receipts: `receipt.read_*` is the shared position (what peers see), `own_read_*` the reader's own
    /// (private reads included); `read_ack` holds the few messages above a watermark read one by one.
    static let v2 = """
        ALTER TABLE receipt ADD COLUMN own_read_seq INTEGER NOT NULL DEFAULT 0 CHECK (own_read_seq >= 0);
        ALTER TABLE receipt ADD COLUMN own_read_time INTEGER NOT NULL DEFAULT 0;
        UPDATE receipt SET own_read_seq = read_seq, own_read_time = read_time;
        CREATE TABLE read_ack (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL REFERENCES account(id),
            seq INTEGER NOT NULL CHECK (seq > 0),
            shared INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, account, seq)
        ) WITHOUT ROWID;
        CREATE TABLE read_setting (
            account TEXT NOT NULL REFERENCES account(id),
            conversation_id TEXT NOT NULL DEFAULT '',
            send_read_receipts INTEGER NOT NULL,
            PRIMARY KEY (account, conversation_id)
        ) WITHOUT ROWID;
        """

    /// Replies and recall: `recall` holds a recall notice's JSON (the entry is part of the log, with its own seq);
    /// `recalled` marks a tombstone (body erased); `counts_unread` is 0 for tombstones and for notices not counted.
    static let v3 = """
        ALTER TABLE message ADD COLUMN reply_to TEXT;
        ALTER TABLE message ADD COLUMN quote TEXT;
        ALTER TABLE message ADD COLUMN recall TEXT;
        ALTER TABLE message ADD COLUMN recalled INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN counts_unread INTEGER NOT NULL DEFAULT 1;
        CREATE INDEX message_by_reply_to ON message(reply_to) WHERE reply_to IS NOT NULL;
        """

    /// Groups and group read receipts. A member's `receipt` row starts at the seq of the entry that added it (so its
    /// watermarks never cover messages sent before it joined); `read_at` / `delivered_at` are when the shared read and
    /// delivery watermarks last moved. `receipt_count` has one row per message that asked for receipts: its
    /// audience and how many of it read the message. `former_member` keeps a leaver's frozen reading position
    /// (readers stay readers). `ack_content` keeps the optional note of an ack.
    static let v4 = """
        ALTER TABLE conversation ADD COLUMN member_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE conversation_member ADD COLUMN role TEXT NOT NULL DEFAULT 'member';
        ALTER TABLE conversation_member ADD COLUMN joined_seq INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE receipt ADD COLUMN read_at INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE receipt ADD COLUMN delivered_at INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE read_ack ADD COLUMN time INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN needs_receipt INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN group_change TEXT;
        ALTER TABLE message ADD COLUMN receipt_request TEXT;
        CREATE INDEX receipt_by_read ON receipt(conversation_id, read_seq, account);
        CREATE INDEX receipt_by_delivered ON receipt(conversation_id, delivered_seq, account);
        CREATE TABLE receipt_count (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            sender TEXT NOT NULL,
            audience INTEGER NOT NULL CHECK (audience >= 0),
            read_count INTEGER NOT NULL CHECK (read_count >= 0),
            PRIMARY KEY (conversation_id, seq)
        ) WITHOUT ROWID;
        CREATE TABLE former_member (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL,
            joined_seq INTEGER NOT NULL,
            left_seq INTEGER NOT NULL,
            read_seq INTEGER NOT NULL,
            read_at INTEGER NOT NULL,
            acks TEXT NOT NULL,
            PRIMARY KEY (conversation_id, account, joined_seq)
        ) WITHOUT ROWID;
        CREATE TABLE ack_content (
            conversation_id TEXT NOT NULL REFERENCES conversation(id),
            seq INTEGER NOT NULL,
            account TEXT NOT NULL,
            content TEXT NOT NULL,
            PRIMARY KEY (conversation_id, seq, account)
        ) WITHOUT ROWID;
        """

    /// `sender_copy` keeps what a one-way recall erased for everyone else, for the sender's account alone (SPEC §6).
    static let v5 = """
        CREATE TABLE sender_copy (
            message_id TEXT PRIMARY KEY NOT NULL,
            sender TEXT NOT NULL,
            body TEXT NOT NULL,
            quote TEXT
        ) WITHOUT ROWID;
        """

    /// What a message's body holds (`image`, an app-defined type …); NULL for text (SPEC §7 message content).
    static let v6 = """
        ALTER TABLE message ADD COLUMN type TEXT;
        """

    /// One push token per device; a token belongs to one device.
    static let v7 = """
        CREATE TABLE push_token (
            account TEXT NOT NULL,
            device TEXT NOT NULL,
            platform TEXT NOT NULL,
            token TEXT NOT NULL,
            sandbox INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (account, device),
            UNIQUE (platform, token)
        ) WITHOUT ROWID;
        """

    /// Webhooks: endpoints, and one delivery row per (event, endpoint), written in the transaction of the change.
    /// `seq` (AUTOINCREMENT: never reused) orders them; the partial index finds each endpoint and conversation's
    /// oldest pending one.
    static let v8 = """
        CREATE TABLE webhook_endpoint (
            id TEXT PRIMARY KEY NOT NULL,
            url TEXT NOT NULL,
            events TEXT NOT NULL,
            secret TEXT NOT NULL,
            previous_secret TEXT,
            previous_secret_expires_at INTEGER,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE webhook_delivery (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            endpoint_id TEXT NOT NULL,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            payload TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER NOT NULL,
            expires_at INTEGER,
            lease_until INTEGER NOT NULL DEFAULT 0,
            last_status INTEGER,
            last_error TEXT,
            delivered_at INTEGER
        );
        CREATE INDEX webhook_delivery_queue ON webhook_delivery (endpoint_id, conversation_id, seq)
            WHERE state = 'pending';
        CREATE INDEX webhook_delivery_due ON webhook_delivery (next_attempt_at) WHERE state = 'pending';
        CREATE INDEX webhook_delivery_by_endpoint ON webhook_delivery (endpoint_id, seq);
        """

    /// The seq of a dismissed group's last entry (`dismissed`); NULL while the group exists.
    static let v9 = """
        ALTER TABLE conversation ADD COLUMN dismissed_seq INTEGER;
        """

    /// Finished webhook deliveries by when they finished, for pruning: only rows that finished enter these indexes.
    static let v10 = """
        CREATE INDEX webhook_delivery_delivered ON webhook_delivery (delivered_at) WHERE state = 'delivered';
        CREATE INDEX webhook_delivery_failed ON webhook_delivery (next_attempt_at) WHERE state = 'failed';
        """

    /// Change stamps (ADR 0017): the stamp of the transaction that last changed a conversation's log, an entry or a
    /// receipt row, and the counter they are drawn from, with an id naming this database in the cursors it hands out.
    /// Rows written before have stamp 0, older than any cursor.
    static let v11 = """
        ALTER TABLE conversation ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE receipt ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE change_clock (store_id TEXT NOT NULL, value INTEGER NOT NULL);
        INSERT INTO change_clock (store_id, value) VALUES (lower(hex(randomblob(8))), 0);
        """

    /// A group's membership version (ADR 0023): the seq of its newest membership change, which an entry appended
    /// after it goes to. Existing groups take their newest change entry's. A membership that ends is stamped, so that
    /// `sync` brings a device the entry that ended it (and what came before it) while it was away. The notes left with
    /// read acks are read notes (the glossary's word; the table was `ack_content`).
    static let v12 = """
        ALTER TABLE ack_content RENAME TO read_note;
        ALTER TABLE former_member ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX former_member_by_account ON former_member (account, stamp);
        ALTER TABLE conversation ADD COLUMN membership_seq INTEGER NOT NULL DEFAULT 0;
        UPDATE conversation SET membership_seq = COALESCE((SELECT max(seq) FROM message
            WHERE message.conversation_id = conversation.id AND message.group_change IS NOT NULL), 0)
        WHERE kind = 'group';
        """

    /// What readiness writes: one row whose counter every probe moves. (A row rewritten with its own values is no
    /// write at all: SQLite leaves a page whose content does not change clean, so such a probe passes on a full disk.)
    /// Moderation: when an account was deactivated, and before when its tokens are refused. A paused webhook endpoint
    /// keeps its deliveries without attempting them.
    static let v13 = """
        CREATE TABLE health_probe (id INTEGER PRIMARY KEY CHECK (id = 1), probes INTEGER NOT NULL);
        INSERT INTO health_probe (id, probes) VALUES (1, 0);
        ALTER TABLE account ADD COLUMN deactivated_at INTEGER;
        ALTER TABLE account ADD COLUMN tokens_revoked_at INTEGER;
        ALTER TABLE webhook_endpoint ADD COLUMN paused_at INTEGER;
        """

    /// A recall or a purge finds the webhook deliveries that carry what it erases by conversation and time (ADR 0028).
    static let v14 = """
        CREATE INDEX webhook_delivery_by_time ON webhook_delivery (conversation_id, created_at);
        """

    /// A message's `ext` (and the copy a one-way recall keeps of it); an account's own view of a conversation
    /// (ADR 0029): cleared through `cleared_seq`, muted, pinned since `pinned_at` (0: not), in a row of its own (not
    /// the `receipt` row, which the other members see), and the entries above `cleared_seq` it deleted for itself.
    static let v15 = """
        ALTER TABLE message ADD COLUMN ext TEXT;
        ALTER TABLE sender_copy ADD COLUMN ext TEXT;
        CREATE TABLE conversation_view (
            conversation_id TEXT NOT NULL,
            account TEXT NOT NULL,
            cleared_seq INTEGER NOT NULL DEFAULT 0,
            muted INTEGER NOT NULL DEFAULT 0,
            pinned_at INTEGER NOT NULL DEFAULT 0,
            stamp INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (conversation_id, account)
        ) WITHOUT ROWID;
        CREATE TABLE deleted_message (
            conversation_id TEXT NOT NULL,
            account TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, account, seq)
        ) WITHOUT ROWID;
        """

    /// The event log that every endpoint reads with its own cursor (ADR 0030). Positions never repeat
    /// (AUTOINCREMENT) and begin after the deliveries recorded before it, so a delivery's number stays unique.
    static let v16 = """
        CREATE TABLE webhook_event (
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            stamp INTEGER NOT NULL,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            message_id TEXT,
            created_at INTEGER NOT NULL,
            payload TEXT NOT NULL
        );
        CREATE INDEX webhook_event_order ON webhook_event (stamp, position);
        CREATE INDEX webhook_event_by_message ON webhook_event (message_id) WHERE message_id IS NOT NULL;
        INSERT INTO sqlite_sequence (name, seq) SELECT 'webhook_event', coalesce(max(seq), 0) FROM webhook_delivery;
        ALTER TABLE webhook_endpoint ADD COLUMN cursor_stamp INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE webhook_endpoint ADD COLUMN cursor_position INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE webhook_endpoint ADD COLUMN cursor_lease_until INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE webhook_endpoint ADD COLUMN start_stamp INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE webhook_endpoint ADD COLUMN start_position INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE webhook_delivery ADD COLUMN event_position INTEGER;
        CREATE INDEX webhook_delivery_by_event ON webhook_delivery (event_position) WHERE event_position IS NOT NULL;
        CREATE INDEX webhook_delivery_by_position ON webhook_delivery (endpoint_id, coalesce(event_position, seq));
        """

    /// How far each import source got (docs/import.md, ADR 0031).
    static let v17 = """
        CREATE TABLE import_progress (
            source TEXT PRIMARY KEY NOT NULL,
            lines INTEGER NOT NULL,
            digest TEXT NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// Files stored by Courier (docs/media.md, ADR 0032).
    static let v18 = """
        CREATE TABLE media (
            id TEXT PRIMARY KEY NOT NULL,
            conversation_id TEXT NOT NULL,
            uploader TEXT,
            content_type TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            state INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX media_by_state ON media (state, created_at);
        """

    /// Webhook batches (ADR 0041): up to this many events of one conversation per request; 0 for one.
    static let v19 = """
        ALTER TABLE webhook_endpoint ADD COLUMN batch_size INTEGER NOT NULL DEFAULT 0;
        """

    /// A reader's kept unread count (ADR 0042): `unread_count` messages of others that count as unread in
    /// `(unread_from, unread_to]`, facts of the log alone (no read acks, deletions or clear), moved along by the next
    /// read over the seqs it read and the ones that arrived since, instead of counted again over the whole backlog.
    static let v20 = """
        ALTER TABLE receipt ADD COLUMN unread_from INTEGER;
        ALTER TABLE receipt ADD COLUMN unread_to INTEGER;
        ALTER TABLE receipt ADD COLUMN unread_count INTEGER;
        """

    /// API keys, signing keys and the audit trail (ADR 0048).
    static let v21 = """
        CREATE TABLE api_key (
            id TEXT PRIMARY KEY NOT NULL,
            name TEXT NOT NULL,
            scopes TEXT NOT NULL,
            secret_sha256 TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            created_by TEXT NOT NULL,
            expires_at INTEGER,
            revoked_at INTEGER
        );
        CREATE TABLE signing_key (
            kid TEXT PRIMARY KEY NOT NULL,
            secret TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            retires_at INTEGER
        );
        CREATE TABLE audit_entry (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            at INTEGER NOT NULL,
            credential TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            request_id TEXT NOT NULL,
            client_address TEXT,
            status INTEGER,
            code TEXT
        );
        CREATE INDEX audit_entry_by_time ON audit_entry (at);
        """

    /// Whether an account's typing is shown to others (ADR 0050); the indicators themselves are never stored.
    static let v22 = """
        ALTER TABLE account ADD COLUMN send_typing_indicators INTEGER NOT NULL DEFAULT 1;
        """

    /// A conversation hidden from the account's list up to a seq (0: shown); a newer entry shows it again.
    static let v23 = """
        ALTER TABLE conversation_view ADD COLUMN hidden_seq INTEGER NOT NULL DEFAULT 0;
        """

    /// A group's profile (ADR 0051): what its owner and admins last set, beside its log's `profileChanged` entries.
    static let v24 = """
        ALTER TABLE conversation ADD COLUMN group_name TEXT;
        ALTER TABLE conversation ADD COLUMN group_avatar TEXT;
        ALTER TABLE conversation ADD COLUMN group_announcement TEXT;
        ALTER TABLE conversation ADD COLUMN group_ext TEXT;
        """

    /// An account's profile (ADR 0053) and the stamp of its last change (0: never set), by which a device asks what
    /// changed among its contacts.
    static let v25 = """
        ALTER TABLE account ADD COLUMN display_name TEXT;
        ALTER TABLE account ADD COLUMN avatar TEXT;
        ALTER TABLE account ADD COLUMN profile_ext TEXT;
        ALTER TABLE account ADD COLUMN profile_stamp INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE account ADD COLUMN profile_updated_at INTEGER;
        CREATE INDEX account_by_profile_stamp ON account(profile_stamp, id) WHERE profile_stamp > 0;
        """

    /// Edits (ADR 0054): an edit entry names the message it edits (`edit`, and `edit_of` for a recall to find every
    /// version); the message's row holds its latest version and when it was made.
    static let v26 = """
        ALTER TABLE message ADD COLUMN edit TEXT;
        ALTER TABLE message ADD COLUMN edit_of TEXT;
        ALTER TABLE message ADD COLUMN edited_at INTEGER;
        CREATE INDEX message_by_edit_of ON message(edit_of) WHERE edit_of IS NOT NULL;
        """

    /// Reactions (ADR 0055): one row per account and reaction on a message, a count per reaction, and the version of
    /// the message's reactions (the stamp of their last change).
    static let v27 = """
        CREATE TABLE reaction (
            message_id TEXT NOT NULL,
            reaction TEXT NOT NULL,
            account TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            time INTEGER NOT NULL,
            PRIMARY KEY (message_id, reaction, account)
        ) WITHOUT ROWID;
        CREATE INDEX reaction_by_account ON reaction(message_id, account);
        CREATE TABLE reaction_count (
            message_id TEXT NOT NULL,
            reaction TEXT NOT NULL,
            total INTEGER NOT NULL,
            PRIMARY KEY (message_id, reaction)
        ) WITHOUT ROWID;
        ALTER TABLE message ADD COLUMN reaction_version INTEGER NOT NULL DEFAULT 0;
        """

    /// A parked delivery is retried by its endpoint's stream, under the stream's lease (ADR 0059): it has no lease
    /// of its own.
    static let v28 = """
        ALTER TABLE webhook_delivery DROP COLUMN lease_until;
        """
}
