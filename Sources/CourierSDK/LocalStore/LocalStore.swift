// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// The SDK's local cache, the source of truth on the device (GRDB, following the GRDB demo's `AppDatabase`).
///
/// Every inbound frame is applied in one write transaction that is idempotent (dedupe by message id and seq,
/// watermarks only forward); the caller emits events only for what the transaction reports as changed.
struct LocalStore: Sendable {
    private let location: CourierClient.Configuration.StoreLocation
    /// The open database: from the start for a file or in memory; for `.directory` once the account is known (each
    /// account has its own file there).
    private let database: Locked<(any DatabaseWriter)?>

    /// Opens the store at `location` (a `.directory` store opens in ``bind(to:)``, once the account is known).
    init(location: CourierClient.Configuration.StoreLocation) throws {
        self.location = location
        switch location {
        case .file(let url): database = Locked(try Self.open(file: url))
        case .inMemory: database = Locked(try Self.open(file: nil))
        case .directory: database = Locked(nil)
        }
    }

    private static func open(file url: URL?) throws -> any DatabaseWriter {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        // Another process may hold the same store (an app extension, or two `courier` commands as one account): wait
        // for its write to end instead of failing with SQLITE_BUSY.
        configuration.busyMode = .timeout(10)
        let writer: any DatabaseWriter
        if let url {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            writer = try DatabasePool(path: url.path, configuration: configuration)
        } else {
            writer = try DatabaseQueue(configuration: configuration)
        }
        try Self.migrator.migrate(writer)
        return writer
    }

    /// The open database. Throws ``CourierError/noAccount`` for a `.directory` store no account was bound to yet.
    var writer: any DatabaseWriter {
        get throws(CourierError) {
            guard let writer = database.withLock({ $0 }) else { throw .noAccount }
            return writer
        }
    }

    /// The account this store's data belongs to, when one was bound before (a store never mixes two accounts' data):
    /// the client works offline with it from launch.
    func boundAccount() throws(CourierError) -> AccountID? {
        guard let writer = database.withLock({ $0 }) else { return nil }
        do {
            return try writer.read { db in
                try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = 'account'")
            }
            .map(AccountID.init(rawValue:))
        } catch {
            throw CourierError.reported(error)
        }
    }

    /// Binds the store to `account` on first use (opening the account's file in a `.directory` store).
    ///
    /// - Throws: ``CourierError/localStore(_:)`` when the store holds another account's data.
    func bind(to account: AccountID) throws(CourierError) {
        do {
            let writer = try database.withLock { database -> any DatabaseWriter in
                if let writer = database { return writer }
                guard case .directory(let folder) = location else { throw CourierError.noAccount }
                // One file per account; the prefix keeps account ids such as `..` from naming a folder.
                let writer = try Self.open(file: folder.appendingPathComponent("account-\(account.rawValue).sqlite"))
                database = writer
                return writer
            }
            try writer.write { db in
                if let owner = try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = 'account'") {
                    guard owner == account.rawValue else {
                        throw CourierError.localStore("This local store belongs to account '\(owner)'.")
                    }
                    return
                }
                try db.execute(
                    sql: "INSERT INTO metadata (key, value) VALUES ('account', ?)",
                    arguments: [account.rawValue]
                )
            }
        } catch {
            throw CourierError.reported(error)
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        let schemas = [
            schemaV1, schemaV2, schemaV3, schemaV4, schemaV5, schemaV6, schemaV7, schemaV8, schemaV9, schemaV10,
            schemaV11, schemaV12, schemaV13, schemaV14, schemaV15, schemaV16, schemaV17, schemaV18,
        ]
        // Migration "vN" runs schemaVN: a new schema goes at the end, never in between.
        for (index, schema) in schemas.enumerated() {
            migrator.registerMigration("v\(index + 1)") { db in try db.execute(sql: schema) }
        }
        return migrator
    }

    /// Account profiles (ADR 0053): the newest version heard of each account; the cursor of their changes is in
    /// `metadata` (`profileCursor`).
    /// Edits (ADR 0054): an edit entry keeps its place in the log (`editOf`: the message it edits; no body of its
    /// own, the edited message holds the latest one) and an edited message when it was last edited.
    /// Reactions (ADR 0055): the counts of a held message's reactions and which are the account's own, at the version
    /// the server last told.
    static let schemaV18 = """
        CREATE TABLE messageReaction (
            messageId TEXT NOT NULL,
            reaction TEXT NOT NULL,
            total INTEGER NOT NULL,
            mine INTEGER NOT NULL,
            PRIMARY KEY (messageId, reaction)
        );
        ALTER TABLE message ADD COLUMN reactionVersion INTEGER NOT NULL DEFAULT 0;
        """

    static let schemaV17 = """
        ALTER TABLE message ADD COLUMN editOf TEXT;
        ALTER TABLE message ADD COLUMN editedAt INTEGER;
        """

    static let schemaV16 = """
        CREATE TABLE accountProfile (
            account TEXT PRIMARY KEY NOT NULL,
            displayName TEXT,
            avatar TEXT,
            ext TEXT,
            version INTEGER NOT NULL,
            updatedAt INTEGER
        );
        """

    /// Changes of the account's own view (delete for me, clear, mute, pin, hide) not yet acknowledged by the server,
    /// in the order made: queued offline as sends and reads are, shown here at once, sent on the next connection.
    static let schemaV15 = """
        CREATE TABLE viewOutbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversationId TEXT NOT NULL,
            request TEXT NOT NULL,
            token TEXT NOT NULL
        );
        """

    /// A group's profile as of the entry at `profileSeq` (a sync's state, or a later `profileChanged` entry).
    static let schemaV14 = """
        ALTER TABLE conversation ADD COLUMN groupName TEXT;
        ALTER TABLE conversation ADD COLUMN groupAvatar TEXT;
        ALTER TABLE conversation ADD COLUMN groupAnnouncement TEXT;
        ALTER TABLE conversation ADD COLUMN groupExt TEXT;
        ALTER TABLE conversation ADD COLUMN profileSeq INTEGER NOT NULL DEFAULT 0;
        """

    /// A conversation hidden from the list up to `hiddenSeq` (0: shown), as the account's view on the server says.
    static let schemaV13 = """
        ALTER TABLE conversation ADD COLUMN hiddenSeq INTEGER NOT NULL DEFAULT 0;
        """

    /// A message's `ext` (and a queued one's); the account's view of each conversation (ADR 0029): cleared through
    /// `clearedSeq`, the entries above it deleted for the account (`deletedEntry`), muted, pinned since `pinnedAt`;
    /// this device's draft; tips the app inserted on this device (`localTip`, after the entry at `afterSeq`).
    /// `deletedEntry` has a rowid, and `readAck` gets one: SQLite tells observers (GRDB's live queries) of changes
    /// to rowid tables only, so a message read out of order (a `readAck` row alone) did not reach a chat screen.
    static let schemaV12 = """
        ALTER TABLE message ADD COLUMN ext TEXT;
        ALTER TABLE outbox ADD COLUMN ext TEXT;
        ALTER TABLE conversation ADD COLUMN clearedSeq INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE conversation ADD COLUMN muted INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE conversation ADD COLUMN pinnedAt INTEGER;
        ALTER TABLE conversation ADD COLUMN draft TEXT;
        CREATE TABLE deletedEntry (
            conversationId TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (conversationId, seq)
        );
        CREATE TABLE localTip (
            id TEXT PRIMARY KEY NOT NULL,
            conversationId TEXT NOT NULL,
            afterSeq INTEGER NOT NULL,
            time INTEGER NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX localTip_by_conversation ON localTip(conversationId, afterSeq);
        CREATE TABLE readAckRows (
            conversationId TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (conversationId, account, seq)
        );
        INSERT INTO readAckRows (conversationId, account, seq) SELECT conversationId, account, seq FROM readAck;
        DROP TABLE readAck;
        ALTER TABLE readAckRows RENAME TO readAck;
        """

    /// Local full-text search (SQLite FTS5, the `unicode61` tokenizer without diacritics): an index of the bodies
    /// of text messages over `message` itself (external content: no second copy of the text), kept by triggers in
    /// the transaction that changes a message — a recall empties the body, and so takes it out of the index.
    /// Messages already stored are indexed by the migration.
    static let schemaV11 = """
        CREATE VIRTUAL TABLE messageText USING fts5(
            body, content = 'message', content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2'
        );
        INSERT INTO messageText (rowid, body) SELECT rowid, body FROM message WHERE \(searchable("message"));
        CREATE TRIGGER messageTextInsert AFTER INSERT ON message WHEN \(searchable("new"))
            BEGIN INSERT INTO messageText (rowid, body) VALUES (new.rowid, new.body); END;
        CREATE TRIGGER messageTextUpdate AFTER UPDATE OF body, recalled ON message
            BEGIN
                INSERT INTO messageText (messageText, rowid, body) SELECT 'delete', old.rowid, old.body
                    WHERE \(searchable("old"));
                INSERT INTO messageText (rowid, body) SELECT new.rowid, new.body WHERE \(searchable("new"));
            END;
        CREATE TRIGGER messageTextDelete AFTER DELETE ON message WHEN \(searchable("old"))
            BEGIN INSERT INTO messageText (messageText, rowid, body) VALUES ('delete', old.rowid, old.body); END;
        """

    /// Whether a row of `message` (named `row`) is in the search index: a text message, not recalled.
    static func searchable(_ row: String) -> String {
        """
        \(row).type IS NULL AND \(row).recall IS NULL AND \(row).groupChange IS NULL AND \(row).receiptRequest IS NULL \
        AND \(row).recalled = 0 AND \(row).body <> ''
        """
    }

    /// Groups: this account's role (`role`), as of the entry at `roleSeq` (a sync's state, or a later membership
    /// entry about it), so that a client knows what it may do (recall others' messages) without asking.
    static let schemaV10 = """
        ALTER TABLE conversation ADD COLUMN role TEXT;
        ALTER TABLE conversation ADD COLUMN roleSeq INTEGER NOT NULL DEFAULT 0;
        """

    /// Groups: a message's group notice and whether it asks for read receipts; for your own group messages the
    /// receipt counts last heard from the server (`readCount` / `unreadCount`, NULL until known) and the readers
    /// the server reported (`groupReader`), which local queries answer from offline.
    static let schemaV4 = """
        ALTER TABLE message ADD COLUMN needsReadReceipt INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN groupChange TEXT;
        ALTER TABLE message ADD COLUMN receiptRequest TEXT;
        ALTER TABLE message ADD COLUMN readCount INTEGER;
        ALTER TABLE message ADD COLUMN unreadCount INTEGER;
        ALTER TABLE outbox ADD COLUMN needsReadReceipt INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE groupReader (
            messageId TEXT NOT NULL,
            account TEXT NOT NULL,
            time INTEGER NOT NULL,
            content TEXT,
            PRIMARY KEY (messageId, account)
        );
        """

    /// A queued message read ack's short content (Agora `sendGroupMessageReadAck` with content).
    /// A store that already holds conversations has synced before this version recorded it (ADR 0009).
    static let schemaV6 = """
        INSERT INTO metadata (key, value) SELECT 'synced', '1' WHERE EXISTS (SELECT 1 FROM conversation);
        """
    /// Messages read one by one go by one name everywhere: `readAck`, as the server's `read_ack`.
    static let schemaV9 = """
        ALTER TABLE readMark RENAME TO readAck;
        """
    /// `heldLive`: the conversation got entries outside a sync since the last one completed, so the next sync names
    /// its cursor (ADR 0017: a sync with `since` names no other).
    static let schemaV8 = """
        ALTER TABLE conversation ADD COLUMN heldLive INTEGER NOT NULL DEFAULT 0;
        """
    /// What a message holds (the wire's `type`; NULL for text).
    static let schemaV7 = """
        ALTER TABLE message ADD COLUMN type TEXT;
        ALTER TABLE outbox ADD COLUMN type TEXT;
        """
    static let schemaV5 = """
        ALTER TABLE readOutbox ADD COLUMN content TEXT;
        """

    static let schemaV1 = """
        CREATE TABLE metadata (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
        CREATE TABLE conversation (
            id TEXT PRIMARY KEY NOT NULL,
            kind TEXT NOT NULL,
            members TEXT NOT NULL,
            lastSeq INTEGER NOT NULL DEFAULT 0,
            syncedSeq INTEGER NOT NULL DEFAULT 0,
            deliveryAckedSeq INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE message (
            id TEXT PRIMARY KEY NOT NULL,
            conversationId TEXT NOT NULL REFERENCES conversation(id),
            seq INTEGER NOT NULL,
            clientId TEXT NOT NULL,
            sender TEXT NOT NULL,
            time INTEGER NOT NULL,
            body TEXT NOT NULL,
            UNIQUE (conversationId, seq)
        );
        CREATE TABLE outbox (
            clientId TEXT PRIMARY KEY NOT NULL,
            conversationId TEXT NOT NULL,
            body TEXT NOT NULL,
            createdAt REAL NOT NULL,
            failureCode TEXT,
            failureMessage TEXT
        );
        CREATE TABLE watermark (
            conversationId TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL,
            deliveredSeq INTEGER NOT NULL DEFAULT 0,
            deliveredTime INTEGER NOT NULL DEFAULT 0,
            readSeq INTEGER NOT NULL DEFAULT 0,
            readTime INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (conversationId, account)
        );
        """

    /// Read receipts. The account's own reading position is its `watermark` row; `readMark` (`readAck` since v9)
    /// holds messages above a watermark read one by one (own and peers'); `readOutbox` the read acks not yet
    /// acknowledged by the server; `conversation.unreadCount` caches the derived count so that changes can be reported.
    static let schemaV2 = """
        ALTER TABLE conversation ADD COLUMN unreadCount INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE readMark (
            conversationId TEXT NOT NULL REFERENCES conversation(id),
            account TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (conversationId, account, seq)
        ) WITHOUT ROWID;
        CREATE TABLE readOutbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversationId TEXT NOT NULL,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            private INTEGER NOT NULL,
            token TEXT NOT NULL
        );
        """

    /// Replies and recall. A recall notice is stored as a log entry (`recall` holds its JSON) and never listed; a
    /// recalled message stays as a tombstone (body erased, `recalled = 1`), listed with status `recalled` (since schema
    /// v7's release; before, tombstones were hidden until the app turned them into a tip).
    static let schemaV3 = """
        ALTER TABLE message ADD COLUMN replyTo TEXT;
        ALTER TABLE message ADD COLUMN quote TEXT;
        ALTER TABLE message ADD COLUMN recall TEXT;
        ALTER TABLE message ADD COLUMN recalled INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN countsUnread INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE message ADD COLUMN tip TEXT;
        ALTER TABLE outbox ADD COLUMN replyTo TEXT;
        CREATE INDEX message_by_replyTo ON message(replyTo) WHERE replyTo IS NOT NULL;
        """

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(CourierError) -> T {
        let writer = try self.writer
        do {
            return try await writer.write(body)
        } catch {
            throw CourierError.reported(error)
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(CourierError) -> T {
        let writer = try self.writer
        do {
            return try await writer.read(body)
        } catch {
            throw CourierError.reported(error)
        }
    }
}

// MARK: - Metadata

extension LocalStore {
    /// This store's device id, created on first use.
    func deviceID() async throws(CourierError) -> DeviceID {
        try await write { db in
            if let value = try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = 'device'") {
                return DeviceID(rawValue: value)
            }
            let value = "d-" + UUID().uuidString.lowercased()
            try db.execute(sql: "INSERT INTO metadata (key, value) VALUES ('device', ?)", arguments: [value])
            return DeviceID(rawValue: value)
        }
    }

    /// Whether a sync has ever completed with this store: from then on the device syncs everything it missed.
    func hasCompletedSync() async throws(CourierError) -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM metadata WHERE key = 'synced')") ?? false
        }
    }

    /// The `since` of the last completed sync (ADR 0017), if any.
    func syncCursor() async throws(CourierError) -> String? {
        try await read { db in try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = 'since'") }
    }

    /// Forgets everything this device learned from the server — conversations, messages, positions, receipts, the sync
    /// cursor — keeping what it has not sent yet (messages and reads): another database answers now (a restored
    /// backup, a move between backends), which may lack messages held here or hold others at their seqs. The next sync
    /// is a new install's, and the device ends up with exactly what that database holds (ADR 0026). Live queries see
    /// the rows go, then come back with the sync.
    func forgetServerState() async throws(CourierError) {
        try await write { db in
            // Profiles too: another database's versions need not be above the ones held here.
            let tables = ["groupReader", "readAck", "watermark", "messageReaction", "message", "conversation", "accountProfile"]
            for table in tables {
                try db.execute(sql: "DELETE FROM \(table)")
            }
            try db.execute(sql: "DELETE FROM metadata WHERE key IN ('since', 'synced', 'profileCursor')")
            // Reads of a position (a seq, a time) named the old database's log: on the new one they could cover
            // messages never seen here. Reads of named messages stay (a message the database lacks is refused).
            try db.execute(sql: "DELETE FROM readOutbox WHERE kind <> 'message'")
        }
    }

    func markSyncCompleted() async throws(CourierError) {
        try await write { db in
            try db.execute(sql: "INSERT INTO metadata (key, value) VALUES ('synced', '1') ON CONFLICT DO NOTHING")
        }
    }

    /// The first gap in `conversation`: the highest seq held without gaps, and the lowest seq held above it; `nil`
    /// when nothing is held past a gap.
    func gap(in conversation: ConversationID) async throws(CourierError) -> (after: Seq, before: Seq)? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT c.syncedSeq, (SELECT min(seq) FROM message m WHERE m.conversationId = c.id AND m.seq > c.syncedSeq)
                        FROM conversation c WHERE c.id = ?
                        """,
                    arguments: [conversation.rawValue]
                ),
                let next = row[1] as Int64?
            else { return nil }
            let synced: Int64 = row[0]
            return next > synced + 1 ? (Seq(synced), Seq(next)) : nil
        }
    }

    /// The highest seq held without gaps, per conversation: what `sync` resumes from.
    func cursors(heldLiveOnly: Bool = false) async throws(CourierError) -> [ConversationID: Seq] {
        try await read { db in
            var cursors: [ConversationID: Seq] = [:]
            let sql = "SELECT id, syncedSeq FROM conversation" + (heldLiveOnly ? " WHERE heldLive = 1" : "")
            for row in try Row.fetchAll(db, sql: sql) {
                cursors[ConversationID(rawValue: row[0])] = Seq(row[1] as Int64)
            }
            return cursors
        }
    }
}
