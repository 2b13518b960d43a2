// Courier — Apache-2.0
import ArgumentParser
import CourierBackends
import CourierDomain
import CourierServer
import CourierStoragePostgres
import CourierStorageSQLite
import CourierWire
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

@main
struct CourierServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier-server",
        abstract: "Courier: a self-hosted messaging server for delivery receipts, read receipts and recall.",
        // The build, and the database schema it writes on each backend (a newer schema is refused at start).
        version: "\(CourierBuild.version) (schema: SQLite \(SQLiteStore.schemaVersion), PostgreSQL \(PostgresStore.schemaVersion))",
        subcommands: [Serve.self, Token.self, Keys.self, Backup.self, Restore.self, Import.self],
        defaultSubcommand: Serve.self
    )
}

struct Options: ParsableArguments {
    @Option(help: "A JSON file of settings by flag name; flags and COURIER_* variables win over it (env COURIER_CONFIG).")
    var config: String?
    @Option(help: "Address to listen on (env COURIER_HOST, default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on (env COURIER_PORT, default 8080).") var port: String?
    @Option(help: "Data folder: database and app secret (env COURIER_DATA_DIR, default ./courier-data).")
    var dataDir: String?
    @Option(help: "PostgreSQL URL for several nodes (env COURIER_POSTGRES_URL; default: SQLite in the data folder).")
    var postgresURL: String?
    @Option(help: "trace|debug|info|notice|warning|error (env COURIER_LOG_LEVEL, default info).") var logLevel: String?
    @Option(help: "text|json: one JSON object per log line for collectors (env COURIER_LOG_FORMAT, default text).")
    var logFormat: String?
    @Option(help: "full|normal: whether an ack waits for the disk (env COURIER_DURABILITY, default full).")
    var durability: String?
    @Option(help: .hidden) var sqliteSynchronous: String?
    @Option(help: "Largest message body in bytes (env COURIER_MAX_BODY_BYTES, default 65536).") var maxBodyBytes:
        String?
    @Option(help: "Largest client frame in bytes (env COURIER_MAX_FRAME_BYTES, default 262144).") var maxFrameBytes:
        String?
    @Option(help: "Most messages per sync/history page (env COURIER_MAX_PAGE_SIZE, default 500).") var maxPageSize:
        String?
    @Option(
        help: "Frames queued per device before it is disconnected (env COURIER_OUTBOUND_QUEUE_FRAMES, default 4096)."
    )
    var outboundQueueFrames: String?
    @Option(
        help: "Whether reads are shared: userChoice, alwaysOn or alwaysOff (env COURIER_READ_RECEIPT_POLICY)."
    )
    var readReceiptPolicy: String?
    @Option(
        help: "How long a sender may recall a message, in seconds (env COURIER_RECALL_WINDOW_SECONDS, default 120)."
    )
    var recallWindowSeconds: String?
    @Option(help: "How long owners and admins may recall others' group messages, in seconds (env COURIER_ADMIN_RECALL_WINDOW_SECONDS, default: the recall window).")
    var adminRecallWindowSeconds: String?
    @Option(help: "Who may ask a group for read receipts: anyMember or ownerAndAdmins (env COURIER_GROUP_RECEIPT_REQUESTERS, default anyMember).")
    var groupReceiptRequesters: String?
    @Option(help: "The largest group in which read receipts may be asked (env COURIER_GROUP_RECEIPT_MAX_SIZE, default none).")
    var groupReceiptMaxSize: String?
    @Option(help: "Bytes queued per device before it is disconnected (env COURIER_OUTBOUND_QUEUE_BYTES, default 8 MiB).")
    var outboundQueueBytes: String?
    @Option(help: "Seconds a connection has to send a request head (env COURIER_REQUEST_HEAD_TIMEOUT_SECONDS, 10).")
    var requestHeadTimeoutSeconds: String?
    @Option(help: "Seconds a WebSocket has to authenticate with connect (env COURIER_AUTH_TIMEOUT_SECONDS, 10).")
    var authTimeoutSeconds: String?
    @Option(help: "Largest REST request body in bytes (env COURIER_MAX_REST_BODY_BYTES, default 1 MiB).")
    var maxRESTBodyBytes: String?
    @Option(help: "Most connections at once (env COURIER_MAX_CONNECTIONS, default: open-files limit − 128).")
    var maxConnections: String?
    @Option(help: "Clock leeway for token times in seconds (env COURIER_TOKEN_LEEWAY_SECONDS, default 60).")
    var tokenLeewaySeconds: String?
    @Option(help: "Longest token lifetime accepted, in seconds (env COURIER_MAX_TOKEN_LIFETIME_SECONDS, default none).")
    var maxTokenLifetimeSeconds: String?
    @Option(help: "Failed connects per address per minute before auth.throttled, 0 for no limit (env COURIER_FAILED_CONNECTS_PER_MINUTE, 60).")
    var failedConnectsPerMinute: String?
    @Option(help: "Sends one device may make a second, five seconds' worth at once, then rate.limited; 0 for no limit (env COURIER_DEVICE_SENDS_PER_SECOND, 20).")
    var deviceSendsPerSecond: String?
    @Option(help: "Other writes (reads, recalls, group changes, settings) one device may make a second; 0 for no limit (env COURIER_DEVICE_WRITES_PER_SECOND, 50).")
    var deviceWritesPerSecond: String?
    @Option(help: "Sends of one account a second on this node, all its devices together; 0 for no limit (env COURIER_ACCOUNT_SENDS_PER_SECOND, 50).")
    var accountSendsPerSecond: String?
    @Option(help: "Typing indicators one device may send a second, five seconds' worth at once; 0 for no limit (env COURIER_DEVICE_TYPING_PER_SECOND, 2).")
    var deviceTypingPerSecond: String?
    @Option(help: "Show typing indicators: true or false (env COURIER_TYPING_INDICATORS, true).")
    var typingIndicators: String?
    @Option(help: "Seconds after sending a message may be edited; 0: devices edit nothing (env COURIER_EDIT_WINDOW_SECONDS, 86400).")
    var editWindowSeconds: String?
    @Option(help: "Let a group's owner and admins edit their members' messages: true or false (env COURIER_ADMINS_EDIT_MESSAGES, false).")
    var adminsEditMessages: String?
    @Option(help: "REST requests one credential (the app secret or an API key) may make a second on this node, then 429 rate.limited; 0 for no limit (env COURIER_REST_REQUESTS_PER_SECOND, 200).")
    var restRequestsPerSecond: String?
    @Option(help: "Accept client tokens signed with the app secret, without a kid: true or false (env COURIER_APP_SECRET_TOKENS, true).")
    var appSecretTokens: String?
    @Option(help: "Days the audit trail keeps a row, 0 for good (env COURIER_AUDIT_RETENTION_DAYS, 365).")
    var auditRetentionDays: String?
    @Option(help: "Proxies whose Forwarded / X-Forwarded-For name the client, as CIDRs, comma-separated, e.g. 127.0.0.1/32 (env COURIER_TRUSTED_PROXIES, default none).")
    var trustedProxies: String?

    @Option(help: "Hours a webhook delivery is retried before it is kept as failed (env COURIER_WEBHOOK_RETRY_HOURS, 24).")
    var webhookRetryHours: String?
    @Option(name: .customLong("webhook-first-retry-ms"), help: "Milliseconds before a failed webhook delivery's first retry; it doubles up to an hour (env COURIER_WEBHOOK_FIRST_RETRY_MS, 5000).")
    var webhookFirstRetryMs: String?
    @Option(name: .customLong("webhook-push-delay-ms"), help: "Milliseconds after a message before message.undelivered looks for recipients who lack it (env COURIER_WEBHOOK_PUSH_DELAY_MS, 2000).")
    var webhookPushDelayMs: String?
    @Option(help: "Hours delivered and failed webhook deliveries are kept, from when they finished (env COURIER_WEBHOOK_RETENTION_HOURS, 168).")
    var webhookRetentionHours: String?
    @Option(help: "true|false: whether webhook endpoints may be on loopback, private, unspecified or multicast addresses; link-local and cloud metadata addresses never may (env COURIER_WEBHOOK_ALLOW_PRIVATE, default false).")
    var webhookAllowPrivate: String?
    @Option(help: "Largest stored file in bytes (env COURIER_MEDIA_MAX_BYTES, default 25 MiB).")
    var mediaMaxBytes: String?
    @Option(help: "Content types stored, comma-separated, image/* for a family (env COURIER_MEDIA_TYPES, default images, video, audio, text, PDF, zip, octet-stream).")
    var mediaTypes: String?
    @Option(help: "Hours a file no message refers to is kept (env COURIER_MEDIA_GRACE_HOURS, 24).")
    var mediaGraceHours: String?
    @Option(name: .customLong("media-s3-endpoint"), help: "An S3-compatible service for files, shared by several nodes (env COURIER_MEDIA_S3_ENDPOINT, default none: DATA_DIR/media).")
    var mediaS3Endpoint: String?
    @Option(name: .customLong("media-s3-bucket"), help: "The bucket (env COURIER_MEDIA_S3_BUCKET).")
    var mediaS3Bucket: String?
    @Option(name: .customLong("media-s3-region"), help: "The bucket's region (env COURIER_MEDIA_S3_REGION, us-east-1).")
    var mediaS3Region: String?
    @Option(name: .customLong("media-s3-access-key-id"), help: "The access key id (env COURIER_MEDIA_S3_ACCESS_KEY_ID).")
    var mediaS3AccessKeyID: String?
    @Option(name: .customLong("media-s3-secret-access-key"), help: "The secret access key; prefer the environment (env COURIER_MEDIA_S3_SECRET_ACCESS_KEY).")
    var mediaS3SecretAccessKey: String?
    @Option(help: "Seconds a node drains on SIGTERM before it cuts what is left and exits (env COURIER_DRAIN_SECONDS, 30).")
    var drainSeconds: String?
    @Option(help: "Network threads serving the connections (env COURIER_EVENT_LOOPS, default one per core, less one on SQLite).")
    var eventLoops: String?
    @Option(help: "PostgreSQL: seconds a request waits for a database connection before it is answered store.unavailable (env COURIER_DATABASE_TIMEOUT_SECONDS, 2).")
    var databaseTimeoutSeconds: String?
    @Option(help: "PostgreSQL: seconds a new database connection may take (env COURIER_DATABASE_CONNECT_TIMEOUT_SECONDS, 3).")
    var databaseConnectTimeoutSeconds: String?
    @Option(help: "PostgreSQL: statement_timeout in seconds on the store's connections (env COURIER_DATABASE_STATEMENT_TIMEOUT_SECONDS, 120).")
    var databaseStatementTimeoutSeconds: String?

    func settings() throws -> ServerSettings {
        try ServerSettings(flags: [
            "host": host, "port": port, "data-dir": dataDir, "postgres-url": postgresURL, "log-level": logLevel,
            "log-format": logFormat,
            "durability": durability, "sqlite-synchronous": sqliteSynchronous, "max-body-bytes": maxBodyBytes, "max-frame-bytes": maxFrameBytes,
            "max-page-size": maxPageSize, "outbound-queue-frames": outboundQueueFrames,
            "read-receipt-policy": readReceiptPolicy, "recall-window-seconds": recallWindowSeconds,
            "outbound-queue-bytes": outboundQueueBytes, "request-head-timeout-seconds": requestHeadTimeoutSeconds,
            "auth-timeout-seconds": authTimeoutSeconds,
            "max-rest-body-bytes": maxRESTBodyBytes, "max-connections": maxConnections,
            "token-leeway-seconds": tokenLeewaySeconds, "max-token-lifetime-seconds": maxTokenLifetimeSeconds,
            "failed-connects-per-minute": failedConnectsPerMinute, "trusted-proxies": trustedProxies, "webhook-retry-hours": webhookRetryHours,
            "rest-requests-per-second": restRequestsPerSecond, "app-secret-tokens": appSecretTokens,
            "audit-retention-days": auditRetentionDays,
            "device-sends-per-second": deviceSendsPerSecond, "device-writes-per-second": deviceWritesPerSecond,
            "account-sends-per-second": accountSendsPerSecond, "device-typing-per-second": deviceTypingPerSecond,
            "typing-indicators": typingIndicators, "edit-window-seconds": editWindowSeconds,
            "admins-edit-messages": adminsEditMessages,
            "webhook-first-retry-ms": webhookFirstRetryMs, "webhook-push-delay-ms": webhookPushDelayMs,
            "webhook-retention-hours": webhookRetentionHours, "webhook-allow-private": webhookAllowPrivate,
            "config": config, "drain-seconds": drainSeconds, "event-loops": eventLoops,
            "database-timeout-seconds": databaseTimeoutSeconds,
            "database-connect-timeout-seconds": databaseConnectTimeoutSeconds,
            "database-statement-timeout-seconds": databaseStatementTimeoutSeconds,
            "admin-recall-window-seconds": adminRecallWindowSeconds, "group-receipt-requesters": groupReceiptRequesters,
            "group-receipt-max-size": groupReceiptMaxSize, "media-max-bytes": mediaMaxBytes, "media-types": mediaTypes,
            "media-grace-hours": mediaGraceHours, "media-s3-endpoint": mediaS3Endpoint, "media-s3-bucket": mediaS3Bucket,
            "media-s3-region": mediaS3Region, "media-s3-access-key-id": mediaS3AccessKeyID,
            "media-s3-secret-access-key": mediaS3SecretAccessKey,
        ])
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server (the default command).")
    @OptionGroup var options: Options

    func run() async throws {
        PrivateFiles.restrictNewFiles()
        let settings = try options.settings()
        // First, before anything makes the shared event loops (Hummingbird, PostgresNIO and the webhooks' client use
        // them): NIO stops the process if its count is set after they were made.
        let cores = System.coreCount
        let eventLoops = settings.eventLoops(cores: cores)
        NIOSingletons.groupLoopCountSuggestion = eventLoops
        // One level for every handler, changeable while the server runs (`PUT /v1/server/log-level`).
        let level = LogLevelControl(Logger.Level(rawValue: settings.logLevel) ?? .info)
        let json = settings.logFormat == "json"
        LoggingSystem.bootstrap { label in
            let handler: any LogHandler =
                json ? JSONLogHandler(label: label, level: .trace) : StreamLogHandler.standardError(label: label)
            return LevelControlledLogHandler(handler, control: level)
        }
        let logger = Logger(label: "courier")
        for variable in settings.unknownVariables {
            let hint = variable.suggestion.map { " (did you mean \($0)?)" } ?? ""
            logger.warning("\(variable.name) names no setting; it is ignored\(hint)")
        }
        if settings.postgresURL != nil, settings.mediaS3 == nil {
            // Each node would keep its uploads to itself: a fetch through another node finds no file.
            logger.warning(
                "Files are kept in this node's data folder: with several nodes on one PostgreSQL, give them a bucket (--media-s3-endpoint, docs/media.md)"
            )
        }
        let (secret, created) = try settings.resolveAppSecret()
        let (backend, folderLock) = try StartRefused.clearly { try settings.openBackend(logger: logger) }
        let looser = PrivateFiles.looser(in: settings.dataDirectory)
        if !looser.isEmpty {
            // Made by an older version or by hand: reported, not changed (the operator decides).
            logger.warning(
                "Others on this host can read \(looser.count) path(s) in the data folder; run chmod -R go-rwx on it",
                metadata: ["paths": "\(looser.prefix(5).joined(separator: ", "))\(looser.count > 5 ? ", …" : "")"]
            )
        }
        var configuration = settings.configuration(secret: secret)
        configuration.logLevel = level
        configuration.startup["event-loops"] = "\(eventLoops) (\(cores) cores)"
        if ProcessInfo.processInfo.environment["NIO_SINGLETON_GROUP_LOOP_COUNT"] != nil {
            logger.warning("NIO_SINGLETON_GROUP_LOOP_COUNT is ignored: the server runs \(eventLoops) event loops (--event-loops)")
        }
        let node = CourierNode(
            configuration: configuration,
            store: backend.store,
            changeFeed: backend.changeFeed,
            prepare: backend.prepare,
            logger: logger
        ) { port in
            say("courier-server listening on ws://\(settings.host):\(port)/v1/ws (\(backend.description))")
            if created {
                say(
                    "Created the app secret. Mint a client token: swift run --package-path Server courier-server token ACCOUNT"
                )
            }
        }
        // SIGTERM drains: the node stops listening, tells every device to reconnect elsewhere (close 1001,
        // `server.shuttingDown`), answers the requests under way, then the store closes. What is left after
        // `--drain-seconds` is cancelled.
        var group = ServiceGroupConfiguration(
            services: (backend.services + [node]).map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        group.maximumGracefulShutdownDuration = .seconds(settings.drainSeconds)
        do {
            try await ServiceGroup(configuration: group).run()
        } catch let error as StorageError {
            // A refusal at start (PostgreSQL's migration found a newer schema): one line, not the enum's dump.
            throw StartRefused(error)
        }
        withExtendedLifetime(folderLock) {}
    }
}

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the data folder's SQLite database to PATH while the server runs (a consistent snapshot)."
    )
    @Argument(help: "Where to write the copy (must not exist).") var path: String
    @OptionGroup var options: Options

    func run() async throws {
        PrivateFiles.restrictNewFiles()
        let settings = try options.settings()
        guard settings.postgresURL == nil else {
            throw ValidationError("PostgreSQL is backed up with its own tools (pg_dump, or base backups and WAL archiving): see docs/operations.md.")
        }
        let database = (settings.dataDirectory as NSString).appendingPathComponent("courier.sqlite")
        let report = try SQLiteStore.backup(databaseAt: database, to: path)
        say("Backed up \(database) to \(path) (\(report.bytes) bytes, identity \(report.identity)).")
        say("Keep the data folder's app-secret with it: tokens and webhooks are signed with it.")
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a backup in place of the data folder's database, with a new identity (the server must be stopped)."
    )
    @Argument(help: "The backup to restore (a file `courier-server backup` wrote).") var backup: String
    @OptionGroup var options: Options

    func run() async throws {
        PrivateFiles.restrictNewFiles()
        let settings = try options.settings()
        guard settings.postgresURL == nil else {
            throw ValidationError("Restore PostgreSQL with its own tools, then give it a new identity: see docs/operations.md.")
        }
        try FileManager.default.createDirectory(atPath: settings.dataDirectory, withIntermediateDirectories: true)
        let lock = try SQLiteStore.FolderLock(folder: settings.dataDirectory)
        let database = (settings.dataDirectory as NSString).appendingPathComponent("courier.sqlite")
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let aside = (settings.dataDirectory as NSString).appendingPathComponent("before-restore-\(stamp)")
        let report = try SQLiteStore.restore(backup: backup, into: database, aside: aside)
        withExtendedLifetime(lock) {}
        say("Restored \(backup) to \(database) (\(report.bytes) bytes) with a new identity, \(report.identity).")
        say("The database it replaced is in \(aside). Devices resync to what the backup holds when they reconnect.")
        // The backup holds the database only: without the secret that signed the old server's tokens, a server
        // started here would make a new one and refuse every device.
        if (try? settings.resolveAppSecret(creating: false)) == nil {
            FileHandle.standardError.write(Data((
                "Warning: \(settings.dataDirectory) has no app secret (an app-secret file, or COURIER_APP_SECRET). A "
                    + "server started here would create a new one: every client token and webhook signature of the "
                    + "old server would be refused. Copy the old app-secret file into the folder (mode 0600) first.\n"
            ).utf8))
        }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a client token for ACCOUNT, signed with the data folder's app secret."
    )
    @Argument(help: "The account id.") var account: String
    @Option(help: "Lifetime in seconds (default 30 days).") var ttl: Int = 86_400 * 30
    @OptionGroup var options: Options

    func run() async throws {
        PrivateFiles.restrictNewFiles()
        let id = AccountID(rawValue: account)
        guard id.isValid else { throw ValidationError("Account ids are 1–128 characters of [A-Za-z0-9._@-].") }
        // Never creates a secret: a token signed with a new one would be refused by the server.
        let (secret, _) = try options.settings().resolveAppSecret(creating: false)
        say(try await TokenAuthority(secret: secret).token(for: id, lifetime: .seconds(ttl)))
    }
}

extension ServerSettings {
    /// The configured store: PostgreSQL, or SQLite in the data folder with the folder's lock, held until the lock is
    /// released (one process per data folder: a second server, an import or a restore is refused meanwhile).
    func openBackend(logger: Logger) throws -> (Backend, SQLiteStore.FolderLock?) {
        if let url = postgresURL {
            let durability = PostgresStore.Durability(rawValue: durability) ?? .full
            return (
                try Backend.postgres(url: url, durability: durability, timeouts: databaseTimeouts, logger: logger), nil
            )
        }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let lock = try SQLiteStore.FolderLock(folder: dataDirectory)
        let backend = try Backend.sqlite(
            .file((dataDirectory as NSString).appendingPathComponent("courier.sqlite")),
            durability: SQLiteStore.Durability(rawValue: durability) ?? .full,
            logger: logger
        )
        return (backend, lock)
    }
}

/// Writes a line to standard output at once (stdout is block-buffered when piped).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A start refused by the database (a newer schema, a read-only file): printed as its reason, one line.
struct StartRefused: Error, CustomStringConvertible {
    let description: String

    init(_ error: StorageError) {
        switch error {
        case .failed(let reason), .unreachable(let reason): description = reason
        default: description = "\(error)"
        }
    }

    static func clearly<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as StorageError { throw StartRefused(error) }
    }
}

extension ServerSettings {
    /// How long the PostgreSQL store waits for the database.
    var databaseTimeouts: PostgresStore.Timeouts {
        PostgresStore.Timeouts(
            connect: .seconds(databaseConnectTimeoutSeconds),
            acquire: .seconds(databaseTimeoutSeconds),
            statement: .seconds(databaseStatementTimeoutSeconds)
        )
    }
}
