// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import CourierServerCore

extension CourierServerConfiguration {
    /// The settings this node runs with, by their flags' names, as `GET /v1/server/configuration` and the console show
    /// them: the node's own configuration with the values in force (the port it listens on, the connection limit it
    /// computed), then what the command resolved around it (``startup``). Never the app secret; a database password is
    /// masked by the command.
    func report(port: Int, maxConnections: Int) -> [(name: String, value: String)] {
        func seconds(_ duration: Duration) -> String { String(duration.components.seconds) }
        var settings: [(String, String)] = [
            ("host", http.host),
            ("port", String(port)),
            ("max-body-bytes", String(limits.maxBodyBytes)),
            ("max-frame-bytes", String(limits.maxFrameBytes)),
            ("max-page-size", String(limits.maxPageSize)),
            ("outbound-queue-frames", String(limits.outboundQueueFrames)),
            ("outbound-queue-bytes", String(limits.outboundQueueBytes)),
            ("request-head-timeout-seconds", seconds(limits.requestHeadTimeout)),
            ("auth-timeout-seconds", seconds(limits.authTimeout)),
            ("max-rest-body-bytes", String(limits.maxRESTBodyBytes)),
            ("max-connections", String(maxConnections)),
            ("token-leeway-seconds", seconds(tokens.leeway)),
            ("max-token-lifetime-seconds", tokens.maxLifetime.map(seconds) ?? "none"),
            ("failed-connects-per-minute", String(tokens.failedConnectsPerMinutePerAddress)),
            ("trusted-proxies", trustedProxies.description),
            ("device-sends-per-second", String(limits.deviceSendsPerSecond)),
            ("device-writes-per-second", String(limits.deviceWritesPerSecond)),
            ("account-sends-per-second", String(limits.accountSendsPerSecond)),
            ("device-typing-per-second", String(limits.deviceTypingPerSecond)),
            ("typing-indicators", String(typingIndicators)),
            ("rest-requests-per-second", String(limits.restRequestsPerSecond)),
            ("app-secret-tokens", String(tokens.acceptsAppSecretTokens)),
            ("audit-retention-days", auditRetention.map { String($0.components.seconds / 86_400) } ?? "0"),
            ("read-receipt-policy", readReceiptPolicy.rawValue),
            ("recall-window-seconds", seconds(recallWindow)),
            ("admin-recall-window-seconds", seconds(adminRecallWindow ?? recallWindow)),
            ("edit-window-seconds", seconds(editWindow)),
            ("admins-edit-messages", String(adminsEditMessages)),
            ("group-receipt-requesters", groupReceipts.requesters.rawValue),
            ("group-receipt-max-size", groupReceipts.maxGroupSize.map(String.init) ?? "none"),
            ("webhook-retry-hours", String(webhooks.retry.period.components.seconds / 3600)),
            ("webhook-first-retry-ms", String(webhooks.retry.initial.milliseconds)),
            ("webhook-push-delay-ms", String(webhooks.pushDelay.milliseconds)),
            ("webhook-retention-hours", String(webhooks.retention.components.seconds / 3600)),
            ("webhook-allow-private", String(webhooks.allowPrivateAddresses)),
        ]
        if let media {
            settings += [
                ("media-max-bytes", String(media.maxBytes)),
                ("media-types", media.types.joined(separator: ",")),
                ("media-grace-hours", String(media.grace.components.seconds / 3600)),
            ]
        }
        settings += startup.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return settings
    }
}

extension String {
    /// A URL with its password replaced by `***` (for showing a PostgreSQL URL).
    var maskingPassword: String {
        guard var components = URLComponents(string: self), components.password != nil else { return self }
        components.password = "***"
        return components.string ?? "***"
    }
}
