// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import CourierServerCore

/// What the settings make: the node's configuration and its app secret.
extension ServerSettings {
    /// The server configuration these settings describe, with `secret` as the app secret.
    public func configuration(secret: AppSecret) -> CourierServerConfiguration {
        var configuration = nodeConfiguration(secret: secret)
        configuration.startup = [
            "data-dir": dataDirectory,
            "postgres-url": postgresURL.map(\.maskingPassword) ?? "none (SQLite in the data folder)",
            "durability": durability,
            "log-level": logLevel,
            "log-format": logFormat,
            "drain-seconds": String(drainSeconds),
            "database-timeouts": postgresURL == nil
                ? "none (SQLite)"
                : "wait \(databaseTimeoutSeconds) s, connect \(databaseConnectTimeoutSeconds) s, statement \(databaseStatementTimeoutSeconds) s",
            "config": configFile ?? "none",
            "media": mediaS3.map { "s3 \($0.endpoint) bucket \($0.bucket)" } ?? "folder \(mediaFolder)",
        ]
        return configuration
    }

    /// How many event loops serve the connections on a machine of `cores` cores: as set, or one per core, less the
    /// core SQLite's writer thread keeps busy (ADR 0061). On SQLite every request that writes runs on that thread
    /// (ADR 0037); a loop beside it on every core would share a core with it, and two devices' answers of one commit
    /// would wake two loops where one would do. PostgreSQL has no such thread: one loop per core.
    public func eventLoops(cores: Int) -> Int {
        eventLoops ?? (postgresURL == nil ? max(1, cores - 1) : max(1, cores))
    }

    /// Where files are kept without a bucket.
    var mediaFolder: String { (dataDirectory as NSString).appendingPathComponent("media") }

    private func nodeConfiguration(secret: AppSecret) -> CourierServerConfiguration {
        var configuration = CourierServerConfiguration(
            http: .init(host: host, port: port),
            limits: .init(
                maxFrameBytes: maxFrameBytes,
                maxBodyBytes: maxBodyBytes,
                maxPageSize: maxPageSize,
                outboundQueueFrames: outboundQueueFrames,
                outboundQueueBytes: outboundQueueBytes,
                authTimeout: .seconds(authTimeoutSeconds),
                requestHeadTimeout: .seconds(requestHeadTimeoutSeconds),
                maxRESTBodyBytes: maxRESTBodyBytes,
                maxConnections: maxConnections,
                deviceSendsPerSecond: deviceSendsPerSecond,
                deviceWritesPerSecond: deviceWritesPerSecond,
                accountSendsPerSecond: accountSendsPerSecond
            ),
            appSecret: secret,
            readReceiptPolicy: readReceiptPolicy,
            recallWindow: .seconds(recallWindowSeconds),
            adminRecallWindow: adminRecallWindowSeconds.map { .seconds($0) },
            groupReceipts: .init(requesters: groupReceiptRequesters, maxGroupSize: groupReceiptMaxSize),
            tokens: .init(
                leeway: .seconds(tokenLeewaySeconds),
                maxLifetime: maxTokenLifetimeSeconds.map { .seconds($0) },
                failedConnectsPerMinutePerAddress: failedConnectsPerMinute
            ),
            webhooks: .init(
                retry: WebhookRetryPolicy(
                    period: .seconds(webhookRetryHours * 3600),
                    initial: .milliseconds(webhookFirstRetryMilliseconds)
                ),
                pushDelay: .milliseconds(webhookPushDelayMilliseconds),
                retention: .seconds(webhookRetentionHours * 3600),
                allowPrivateAddresses: webhookAllowPrivate
            )
        )
        configuration.trustedProxies = trustedProxies
        configuration.limits.restRequestsPerSecond = restRequestsPerSecond
        configuration.limits.deviceTypingPerSecond = deviceTypingPerSecond
        configuration.typingIndicators = typingIndicators
        configuration.editWindow = .seconds(editWindowSeconds)
        configuration.adminsEditMessages = adminsEditMessages
        configuration.tokens.acceptsAppSecretTokens = appSecretTokens
        configuration.auditRetention = auditRetentionDays == 0 ? nil : .seconds(auditRetentionDays * 86_400)
        configuration.media = .init(
            place: mediaS3.map { .s3($0, incoming: mediaFolder + "/incoming") } ?? .folder(mediaFolder),
            maxBytes: mediaMaxBytes,
            types: mediaTypes,
            grace: .seconds(mediaGraceHours * 3600)
        )
        return configuration
    }

    /// The app secret: `COURIER_APP_SECRET` if set, else the data folder's `app-secret` (created on first start).
    /// With `creating: false` (`courier-server token`) a data folder without a secret is an error that says where it
    /// looked, instead of a new secret the running server does not know.
    public func resolveAppSecret(creating: Bool = true) throws -> (secret: AppSecret, created: Bool) {
        if let appSecret { return (try AppSecret(appSecret), false) }
        guard creating else {
            guard let secret = try AppSecret.load(inFolder: dataDirectory) else {
                throw AppSecretError.missing((dataDirectory as NSString).appendingPathComponent("app-secret"))
            }
            return (secret, false)
        }
        return try AppSecret.loadOrCreate(inFolder: dataDirectory)
    }
}
