// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
public import CourierWire
internal import Foundation
internal import CourierServerCore

/// The server's settings as an operator gives them: command-line flags first, then `COURIER_*` environment
/// variables, then the configuration file (`--config FILE` or `COURIER_CONFIG`: a JSON object whose keys are the
/// flags' names without `--`), then defaults. The one place that lists them all (docs/configuration.md mirrors it). A
/// key of the file that names no setting, or a value the server cannot use, is refused at start with its name.
///
/// | flag | environment | default |
/// | --- | --- | --- |
/// | `--config` | `COURIER_CONFIG` | none |
/// | `--host` | `COURIER_HOST` | `127.0.0.1` |
/// | `--port` | `COURIER_PORT` | `8080` |
/// | `--data-dir` | `COURIER_DATA_DIR` | `./courier-data` |
/// | `--postgres-url` | `COURIER_POSTGRES_URL` | none: SQLite in the data folder |
/// | `--log-level` | `COURIER_LOG_LEVEL` | `info` |
/// | `--log-format` | `COURIER_LOG_FORMAT` | `text` (or `json`: one object per line, see ``JSONLogHandler``) |
/// | `--durability` | `COURIER_DURABILITY` | `full` (`normal` is the faster opt-in; `--sqlite-synchronous` is an alias) |
/// | `--max-body-bytes` | `COURIER_MAX_BODY_BYTES` | `65536` |
/// | `--max-frame-bytes` | `COURIER_MAX_FRAME_BYTES` | `262144` |
/// | `--max-page-size` | `COURIER_MAX_PAGE_SIZE` | `500` |
/// | `--outbound-queue-frames` | `COURIER_OUTBOUND_QUEUE_FRAMES` | `4096` |
/// | `--outbound-queue-bytes` | `COURIER_OUTBOUND_QUEUE_BYTES` | `8388608` |
/// | `--request-head-timeout-seconds` | `COURIER_REQUEST_HEAD_TIMEOUT_SECONDS` | `10` |
/// | `--auth-timeout-seconds` | `COURIER_AUTH_TIMEOUT_SECONDS` | `10` |
/// | `--max-rest-body-bytes` | `COURIER_MAX_REST_BODY_BYTES` | `1048576` |
/// | `--max-connections` | `COURIER_MAX_CONNECTIONS` | the open-files limit − 128 |
/// | `--token-leeway-seconds` | `COURIER_TOKEN_LEEWAY_SECONDS` | `60` |
/// | `--max-token-lifetime-seconds` | `COURIER_MAX_TOKEN_LIFETIME_SECONDS` | none |
/// | `--failed-connects-per-minute` | `COURIER_FAILED_CONNECTS_PER_MINUTE` | `60` per client address (0: off) |
/// | `--trusted-proxies` | `COURIER_TRUSTED_PROXIES` | none: the TCP peer is the client |
/// | `--device-sends-per-second` | `COURIER_DEVICE_SENDS_PER_SECOND` | `20` (five seconds' worth at once; 0: off) |
/// | `--device-writes-per-second` | `COURIER_DEVICE_WRITES_PER_SECOND` | `50` (0: off) |
/// | `--account-sends-per-second` | `COURIER_ACCOUNT_SENDS_PER_SECOND` | `50` per node (0: off) |
/// | `--rest-requests-per-second` | `COURIER_REST_REQUESTS_PER_SECOND` | `200` per credential per node (0: off) |
/// | `--app-secret-tokens` | `COURIER_APP_SECRET_TOKENS` | `true` (`false`: client tokens must name a signing key) |
/// | `--audit-retention-days` | `COURIER_AUDIT_RETENTION_DAYS` | `365` (0: keep every row) |
/// | `--recall-window-seconds` | `COURIER_RECALL_WINDOW_SECONDS` | `120` |
/// | `--admin-recall-window-seconds` | `COURIER_ADMIN_RECALL_WINDOW_SECONDS` | the recall window |
/// | `--edit-window-seconds` | `COURIER_EDIT_WINDOW_SECONDS` | `86400` (0: devices edit nothing) |
/// | `--admins-edit-messages` | `COURIER_ADMINS_EDIT_MESSAGES` | `false` (`true`: group owners and admins edit members' messages) |
/// | `--group-receipt-requesters` | `COURIER_GROUP_RECEIPT_REQUESTERS` | `anyMember` (or `ownerAndAdmins`) |
/// | `--group-receipt-max-size` | `COURIER_GROUP_RECEIPT_MAX_SIZE` | none |
/// | `--webhook-retry-hours` | `COURIER_WEBHOOK_RETRY_HOURS` | `24` |
/// | `--webhook-first-retry-ms` | `COURIER_WEBHOOK_FIRST_RETRY_MS` | `5000` |
/// | `--webhook-push-delay-ms` | `COURIER_WEBHOOK_PUSH_DELAY_MS` | `2000` |
/// | `--webhook-retention-hours` | `COURIER_WEBHOOK_RETENTION_HOURS` | `168` |
/// | `--webhook-allow-private` | `COURIER_WEBHOOK_ALLOW_PRIVATE` | `false` (`true`: loopback and private endpoints) |
/// | `--drain-seconds` | `COURIER_DRAIN_SECONDS` | `30` |
/// | `--event-loops` | `COURIER_EVENT_LOOPS` | one per core, less one on SQLite (at least one) |
/// | `--database-timeout-seconds` | `COURIER_DATABASE_TIMEOUT_SECONDS` | `2` |
/// | `--database-connect-timeout-seconds` | `COURIER_DATABASE_CONNECT_TIMEOUT_SECONDS` | `3` |
/// | `--database-statement-timeout-seconds` | `COURIER_DATABASE_STATEMENT_TIMEOUT_SECONDS` | `120` |
/// | `--read-receipt-policy` | `COURIER_READ_RECEIPT_POLICY` | `userChoice` (or `alwaysOn`, `alwaysOff`) |
/// | `--media-max-bytes` | `COURIER_MEDIA_MAX_BYTES` | `26214400` (25 MiB) |
/// | `--media-types` | `COURIER_MEDIA_TYPES` | `image/*,video/*,audio/*,text/plain,application/pdf,application/zip,application/octet-stream` |
/// | `--media-grace-hours` | `COURIER_MEDIA_GRACE_HOURS` | `24` |
/// | `--media-s3-endpoint` | `COURIER_MEDIA_S3_ENDPOINT` | none: files in `DATA_DIR/media` |
/// | `--media-s3-bucket` | `COURIER_MEDIA_S3_BUCKET` | none (needed with an endpoint) |
/// | `--media-s3-region` | `COURIER_MEDIA_S3_REGION` | `us-east-1` |
/// | `--media-s3-access-key-id` | `COURIER_MEDIA_S3_ACCESS_KEY_ID` | none (needed with an endpoint) |
/// | `--media-s3-secret-access-key` | `COURIER_MEDIA_S3_SECRET_ACCESS_KEY` | none (needed with an endpoint) |
/// | — | `COURIER_APP_SECRET` | read from, or created in, `DATA_DIR/app-secret` |
public struct ServerSettings: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var dataDirectory = "./courier-data"
    /// When set, the node stores everything in this PostgreSQL database (shared by several nodes).
    public var postgresURL: String?
    public var logLevel = "info"
    /// `text` for people, `json` for log collectors.
    public var logFormat = "text"
    /// `full`: an acknowledged write has reached the disk (SQLite `synchronous=FULL`, PostgreSQL
    /// `synchronous_commit=on`). `normal`: faster; a power loss (SQLite) or a database crash (PostgreSQL) may lose
    /// the last acknowledged writes.
    public var durability = "full"
    public var maxBodyBytes = 64 * 1024
    public var maxFrameBytes = 256 * 1024
    public var maxPageSize = 500
    public var outboundQueueFrames = 4096
    public var outboundQueueBytes = 8 << 20
    public var requestHeadTimeoutSeconds = 10
    public var authTimeoutSeconds = 10
    public var maxRESTBodyBytes = 1 << 20
    /// `nil`: the open-files limit minus a reserve for the store.
    public var maxConnections: Int?
    public var tokenLeewaySeconds = 60
    /// `nil`: tokens may have any lifetime.
    public var maxTokenLifetimeSeconds: Int?
    /// Per client address; 0 turns the limit off.
    public var failedConnectsPerMinute = 60
    /// Sends and other writes a device may make a second, and sends of an account on one node (0: no limit).
    public var deviceSendsPerSecond = 20
    public var deviceWritesPerSecond = 50
    public var accountSendsPerSecond = 50
    /// Typing indicators a device may send a second (0: no limit), and whether the server shows any.
    public var deviceTypingPerSecond = 2
    public var typingIndicators = true
    /// REST requests one credential may make a second on this node (0: no limit).
    public var restRequestsPerSecond = 200
    /// Whether client tokens signed with the app secret (no `kid`) are accepted.
    public var appSecretTokens = true
    /// Days audit rows are kept (0: for good).
    public var auditRetentionDays = 365
    /// The proxies whose `X-Forwarded-For` names the client (CIDRs, comma-separated).
    public var trustedProxies = TrustedProxies.none
    public var readReceiptPolicy = ReadReceiptPolicy.userChoice
    public var recallWindowSeconds = 120
    /// How long owners and admins may recall others' group messages; `nil`: the recall window.
    public var adminRecallWindowSeconds: Int?
    /// How long after sending a message may be edited (0: devices edit nothing).
    public var editWindowSeconds = 86_400
    /// Whether a group's owner and admins edit their members' messages.
    public var adminsEditMessages = false
    /// Who may ask a group for read receipts.
    public var groupReceiptRequesters = ReceiptRequesters.anyMember
    /// The largest group in which read receipts may be asked; `nil`: no limit.
    public var groupReceiptMaxSize: Int?
    /// How long a node drains on SIGTERM (devices told to reconnect elsewhere, requests under way answered) before
    /// it cuts what is left and exits.
    public var drainSeconds = 30
    /// The network threads (NIO event loops) every connection is served on; `nil`: ``eventLoops(cores:)`` decides.
    public var eventLoops: Int?
    /// PostgreSQL: how long a request waits for a connection of the pool before it is answered `store.unavailable`.
    public var databaseTimeoutSeconds = 2
    /// PostgreSQL: how long a new connection may take (TCP, TLS, authentication).
    public var databaseConnectTimeoutSeconds = 3
    /// PostgreSQL: `statement_timeout` on the store's connections (migrations run without it).
    public var databaseStatementTimeoutSeconds = 120
    /// The configuration file the settings were read from, if any.
    public var configFile: String?
    /// How long a webhook delivery is retried before it is kept as failed.
    public var webhookRetryHours = 24
    /// The first wait before a failed webhook delivery is tried again (it doubles from there, up to an hour).
    public var webhookFirstRetryMilliseconds = 5000
    /// How long after a message `message.undelivered` looks for recipients who lack it.
    public var webhookPushDelayMilliseconds = 2000
    /// How long delivered and failed webhook deliveries are kept (the delivery log), from when they finished.
    public var webhookRetentionHours = 168
    /// Whether webhook endpoints may be on loopback, private, unspecified or multicast addresses (link-local and
    /// metadata addresses never may).
    public var webhookAllowPrivate = false
    /// Largest stored file.
    public var mediaMaxBytes = 25 << 20
    /// The content types stored (`image/*` for a family).
    public var mediaTypes = CourierServerConfiguration.Media.defaultTypes
    /// How long a file no message refers to is kept.
    public var mediaGraceHours = 24
    /// An S3-compatible bucket for files (several nodes); `nil`: the data folder's `media`.
    public var mediaS3: S3Settings?
    public var appSecret: String?
    /// `COURIER_*` environment variables that name no setting, each with the setting's variable it is probably a
    /// typo of (the server warns about them at start).
    public var unknownVariables: [UnknownVariable] = []

    public struct UnknownVariable: Sendable, Equatable {
        public let name: String
        /// The variable of a setting it is one or two letters away from.
        public let suggestion: String?
    }

    /// Resolves settings from flags (`nil` = not given) over an environment over the configuration file they name.
    public init(flags: [String: String?] = [:], environment: [String: String]? = nil) throws(SettingsError) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        configFile = (flags["config"] ?? nil) ?? environment["COURIER_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let contents = try configFile.map { path throws(SettingsError) in try Self.read(configFile: path) } ?? [:]
        var file: [String: String] = [:]
        for case let (key, .text(text)) in contents { file[key] = text }
        // Every name the settings below look up; a key of the file that is none of them is refused.
        var known: Set<String> = []
        func value(_ name: String) -> String? {
            known.insert(name)
            if let flag = flags[name] ?? nil { return flag }
            let key = "COURIER_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
            return environment[key].flatMap { $0.isEmpty ? nil : $0 } ?? file[name]
        }
        func integer(_ name: String, _ current: Int, range: ClosedRange<Int>) throws(SettingsError) -> Int {
            guard let text = value(name) else { return current }
            guard let number = Int(text), range.contains(number) else { throw .invalid(name, text) }
            return number
        }
        /// A setting whose default is none: `nil` unless given.
        func optionalInteger(_ name: String, range: ClosedRange<Int>) throws(SettingsError) -> Int? {
            value(name) == nil ? nil : try integer(name, 0, range: range)
        }
        func boolean(_ name: String, _ current: Bool) throws(SettingsError) -> Bool {
            guard let text = value(name) else { return current }
            guard text == "true" || text == "false" else { throw .invalid(name, text) }
            return text == "true"
        }
        host = value("host") ?? host
        port = try integer("port", port, range: 0...65535)
        dataDirectory = value("data-dir") ?? dataDirectory
        postgresURL = value("postgres-url")
        logLevel = value("log-level") ?? logLevel
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(logLevel) else {
            throw .invalid("log-level", logLevel)
        }
        logFormat = value("log-format") ?? logFormat
        guard ["text", "json"].contains(logFormat) else { throw .invalid("log-format", logFormat) }
        let synchronous = value("sqlite-synchronous")
        durability = value("durability") ?? synchronous ?? durability
        guard ["full", "normal"].contains(durability) else { throw .invalid("durability", durability) }
        maxBodyBytes = try integer("max-body-bytes", maxBodyBytes, range: 1...(16 << 20))
        maxFrameBytes = try integer("max-frame-bytes", maxFrameBytes, range: 1024...(64 << 20))
        maxPageSize = try integer("max-page-size", maxPageSize, range: 1...10_000)
        outboundQueueFrames = try integer("outbound-queue-frames", outboundQueueFrames, range: 16...1_000_000)
        recallWindowSeconds = try integer("recall-window-seconds", recallWindowSeconds, range: 0...(365 * 86_400))
        adminRecallWindowSeconds = try optionalInteger("admin-recall-window-seconds", range: 0...(365 * 86_400))
        editWindowSeconds = try integer("edit-window-seconds", editWindowSeconds, range: 0...(365 * 86_400))
        adminsEditMessages = try boolean("admins-edit-messages", adminsEditMessages)
        if let requesters = value("group-receipt-requesters") {
            groupReceiptRequesters = ReceiptRequesters(rawValue: requesters)
            guard ReceiptRequesters.all.contains(groupReceiptRequesters) else {
                throw .invalid("group-receipt-requesters", requesters)
            }
        }
        groupReceiptMaxSize = try optionalInteger("group-receipt-max-size", range: 1...10_000_000)
        outboundQueueBytes = try integer("outbound-queue-bytes", outboundQueueBytes, range: (64 << 10)...(1 << 30))
        requestHeadTimeoutSeconds = try integer("request-head-timeout-seconds", requestHeadTimeoutSeconds, range: 1...300)
        authTimeoutSeconds = try integer("auth-timeout-seconds", authTimeoutSeconds, range: 1...300)
        maxRESTBodyBytes = try integer("max-rest-body-bytes", maxRESTBodyBytes, range: (16 << 10)...(64 << 20))
        maxConnections = try optionalInteger("max-connections", range: 1...10_000_000)
        webhookRetryHours = try integer("webhook-retry-hours", webhookRetryHours, range: 1...(24 * 30))
        webhookFirstRetryMilliseconds = try integer(
            "webhook-first-retry-ms",
            webhookFirstRetryMilliseconds,
            range: 10...3_600_000
        )
        webhookPushDelayMilliseconds = try integer("webhook-push-delay-ms", webhookPushDelayMilliseconds, range: 0...600_000)
        webhookRetentionHours = try integer("webhook-retention-hours", webhookRetentionHours, range: 1...87_600)
        webhookAllowPrivate = try boolean("webhook-allow-private", webhookAllowPrivate)
        drainSeconds = try integer("drain-seconds", drainSeconds, range: 1...3600)
        eventLoops = try optionalInteger("event-loops", range: 1...1024)
        databaseTimeoutSeconds = try integer("database-timeout-seconds", databaseTimeoutSeconds, range: 1...600)
        databaseConnectTimeoutSeconds = try integer(
            "database-connect-timeout-seconds",
            databaseConnectTimeoutSeconds,
            range: 1...600
        )
        databaseStatementTimeoutSeconds = try integer(
            "database-statement-timeout-seconds",
            databaseStatementTimeoutSeconds,
            range: 1...86_400
        )
        tokenLeewaySeconds = try integer("token-leeway-seconds", tokenLeewaySeconds, range: 0...3600)
        failedConnectsPerMinute = try integer("failed-connects-per-minute", failedConnectsPerMinute, range: 0...1_000_000)
        deviceSendsPerSecond = try integer("device-sends-per-second", deviceSendsPerSecond, range: 0...1_000_000)
        deviceWritesPerSecond = try integer("device-writes-per-second", deviceWritesPerSecond, range: 0...1_000_000)
        accountSendsPerSecond = try integer("account-sends-per-second", accountSendsPerSecond, range: 0...1_000_000)
        deviceTypingPerSecond = try integer("device-typing-per-second", deviceTypingPerSecond, range: 0...1_000_000)
        typingIndicators = try boolean("typing-indicators", typingIndicators)
        restRequestsPerSecond = try integer("rest-requests-per-second", restRequestsPerSecond, range: 0...1_000_000)
        auditRetentionDays = try integer("audit-retention-days", auditRetentionDays, range: 0...36_500)
        appSecretTokens = try boolean("app-secret-tokens", appSecretTokens)
        if let proxies = value("trusted-proxies") {
            do { trustedProxies = try TrustedProxies.parse(proxies) } catch { throw .invalid("trusted-proxies", error.entry) }
        }
        maxTokenLifetimeSeconds = try optionalInteger("max-token-lifetime-seconds", range: 60...(3650 * 86_400))
        if let policy = value("read-receipt-policy") {
            readReceiptPolicy = ReadReceiptPolicy(rawValue: policy)
            guard ReadReceiptPolicy.all.contains(readReceiptPolicy) else {
                throw .invalid("read-receipt-policy", policy)
            }
        }
        mediaMaxBytes = try integer("media-max-bytes", mediaMaxBytes, range: 1...(4 << 30))
        if let types = value("media-types") {
            mediaTypes = types.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !mediaTypes.isEmpty, mediaTypes.allSatisfy({ $0.split(separator: "/").count == 2 }) else {
                throw .invalid("media-types", types)
            }
        }
        mediaGraceHours = try integer("media-grace-hours", mediaGraceHours, range: 1...87_600)
        let s3 = ["endpoint", "bucket", "region", "access-key-id", "secret-access-key"].map { value("media-s3-" + $0) }
        if let endpoint = s3[0] {
            guard let scheme = URLComponents(string: endpoint)?.scheme, ["http", "https"].contains(scheme) else {
                throw .invalid("media-s3-endpoint", endpoint)
            }
            for (index, name) in [(1, "bucket"), (3, "access-key-id"), (4, "secret-access-key")] where s3[index] == nil {
                throw .invalid("media-s3-\(name)", "none (needed with media-s3-endpoint)")
            }
            mediaS3 = S3Settings(
                endpoint: endpoint,
                bucket: s3[1] ?? "",
                region: s3[2] ?? "us-east-1",
                accessKeyID: s3[3] ?? "",
                secretAccessKey: s3[4] ?? ""
            )
        }
        appSecret = environment["COURIER_APP_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        // `COURIER_*` variables that name no setting: a typo would otherwise pass unnoticed (the file's typos are
        // refused; the environment is shared with other tools, so these are warned about at start instead).
        // `COURIER_TEST_*` belong to the test suites.
        let variables = Dictionary(uniqueKeysWithValues: known.map { name in
            ("COURIER_" + name.uppercased().replacingOccurrences(of: "-", with: "_"), name)
        })
        unknownVariables = environment.keys.sorted().filter { key in
            key.hasPrefix("COURIER_") && !key.hasPrefix("COURIER_TEST_") && variables[key] == nil
                && !["COURIER_APP_SECRET", "COURIER_CONFIG"].contains(key)
        }.map { key in
            UnknownVariable(name: key, suggestion: variables.keys.sorted().first { Self.distance($0, key) <= 2 })
        }
        if let configFile {
            // A key that names no setting is refused whatever its value (null included); then a value of a type no
            // setting takes (a fraction, a list).
            if let unknown = contents.keys.sorted().first(where: { !known.contains($0) }) {
                throw .unknownKey(unknown, file: configFile)
            }
            for case let (key, .other(description)) in contents.sorted(by: { $0.key < $1.key }) {
                throw .invalid(key, description)
            }
        }
    }

    /// The edit distance between two names (a typo's distance from the name meant).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The configuration file's values by name. A number must be an integer; a boolean is read as `true` or `false`
    /// (which only `webhook-allow-private` takes); `null` leaves the default.
    static func read(configFile path: String) throws(SettingsError) -> [String: FileValue] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .unreadableFile(path, "\(error.localizedDescription)")
        }
        do { return try JSONDecoder().decode([String: FileValue].self, from: data) } catch {
            throw .unreadableFile(path, "it is not a JSON object of settings by name (\(error))")
        }
    }

    /// One value of the configuration file: text (a string, an integer or a boolean), `null`, or something no setting
    /// takes.
    enum FileValue: Decodable {
        case text(String)
        case absent
        case other(String)
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .absent
            } else if let integer = try? container.decode(Int.self) {
                self = .text(String(integer))
            } else if let text = try? container.decode(String.self) {
                self = .text(text)
            } else if let flag = try? container.decode(Bool.self) {
                self = .text(String(flag))
            } else if let number = try? container.decode(Double.self) {
                self = .other(String(number))
            } else {
                self = .other("a list or an object")
            }
        }
    }
}

/// A setting with a value the server cannot use.
public enum SettingsError: Error, Equatable, CustomStringConvertible {
    case invalid(String, String)
    /// A key of the configuration file that names no setting.
    case unknownKey(String, file: String)
    case unreadableFile(String, String)
    public var description: String {
        switch self {
        case .invalid(let name, let value): "Invalid value '\(value)' for --\(name)."
        case .unknownKey(let name, let file): "Unknown setting '\(name)' in \(file) (keys are the flags' names without --)."
        case .unreadableFile(let path, let reason): "Cannot read the configuration file \(path): \(reason)"
        }
    }
}
