// Courier — Apache-2.0
public import CourierStorage
internal import CourierDomain
public import CourierWire
internal import Foundation

/// Everything the server needs to know, as a plain value. The executable fills it from flags and environment
/// variables (see `courier-server serve --help` and docs/configuration.md); tests build it directly.
public struct CourierServerConfiguration: Sendable {
    /// Where to listen.
    public struct HTTP: Sendable {
        public var host: String
        /// 0 picks a free port (tests).
        public var port: Int
        public init(host: String = "127.0.0.1", port: Int = 8080) {
            self.host = host
            self.port = port
        }
    }

    /// Published limits (see docs/protocol.md §6). Every queue is bounded.
    public struct Limits: Sendable {
        /// Largest client frame accepted and answered; larger ones get `frame.tooLarge`.
        public var maxFrameBytes: Int
        /// Largest message body (UTF-8 bytes); larger ones get `message.bodyTooLarge`.
        public var maxBodyBytes: Int
        /// Most messages in one `sync` or `history` ack.
        public var maxPageSize: Int
        /// Frames queued for one device; past that the device is disconnected (it reconnects and syncs).
        public var outboundQueueFrames: Int
        /// Bytes of frames queued for one device; past that the device is disconnected.
        public var outboundQueueBytes: Int
        /// Time a new connection has to send `connect`.
        public var authTimeout: Duration
        /// Most accounts named in one `createGroup` or `groupChange` (a larger group is built in several).
        public var maxGroupChangeAccounts: Int
        /// Time a new TCP connection has to send a complete HTTP request head (the WebSocket upgrade or a REST call);
        /// then it is answered 408 and closed. Bytes that trickle in do not extend it.
        public var requestHeadTimeout: Duration
        /// Most bytes of one HTTP request head; a larger one is answered 431 and closed.
        public var maxRequestHeadBytes: Int
        /// Time an HTTP keep-alive connection may stay idle between REST requests.
        public var httpIdleTimeout: Duration
        /// Largest REST request body; a larger one is refused with 413 `request.tooLarge`.
        public var maxRESTBodyBytes: Int
        /// Most connections the node holds at once (WebSocket and HTTP); further ones wait in the listen backlog.
        /// `nil`: derived from the open-files limit, leaving room for the store's files and connections.
        public var maxConnections: Int?
        /// Failed `connect`s one connection may make before it is closed (reason `auth.tooManyFailures`).
        public var failedConnectsPerConnection: Int
        /// How often the server pings a WebSocket; a peer that has not answered a ping by the next is closed (1001,
        /// `Ping timeout`).
        public var pingInterval: Duration
        /// Requests one connection may have in flight (pipelining): the server works on up to this many of
        /// a device's requests at once — answered in request order, those of one conversation run one after the
        /// other — and reads the device's next frame when one is answered.
        public var maxRequestsInFlight: Int
        /// Sends one device may make a second, five seconds' worth saved up (a token bucket); past that a send is
        /// refused with `rate.limited` and when to retry. 0: no limit.
        public var deviceSendsPerSecond: Int
        /// The same for one device's other writes (reads, recalls, group changes, settings, view changes, push
        /// tokens; deliveries are not counted).
        public var deviceWritesPerSecond: Int
        /// Sends of one account a second, all its devices on this node together.
        public var accountSendsPerSecond: Int
        /// Typing indicators one device may send a second, five seconds' worth saved up; past that `rate.limited`.
        /// 0: no limit.
        public var deviceTypingPerSecond = 2
        /// REST requests one credential (the app secret, or one API key) may make a second on this node, five
        /// seconds' worth saved up; past that 429 `rate.limited` with `Retry-After`. 0: no limit.
        public var restRequestsPerSecond = 200
        public init(
            maxFrameBytes: Int = 256 * 1024,
            maxBodyBytes: Int = 64 * 1024,
            maxPageSize: Int = 500,
            outboundQueueFrames: Int = 4096,
            outboundQueueBytes: Int = 8 << 20,
            authTimeout: Duration = .seconds(10),
            maxGroupChangeAccounts: Int = 1000,
            requestHeadTimeout: Duration = .seconds(10),
            maxRequestHeadBytes: Int = 32 * 1024,
            httpIdleTimeout: Duration = .seconds(60),
            maxRESTBodyBytes: Int = 1 << 20,
            maxConnections: Int? = nil,
            failedConnectsPerConnection: Int = 5,
            pingInterval: Duration = .seconds(30),
            maxRequestsInFlight: Int = 32,
            deviceSendsPerSecond: Int = 20,
            deviceWritesPerSecond: Int = 50,
            accountSendsPerSecond: Int = 50
        ) {
            self.maxRequestsInFlight = max(1, maxRequestsInFlight)
            self.deviceSendsPerSecond = max(0, deviceSendsPerSecond)
            self.deviceWritesPerSecond = max(0, deviceWritesPerSecond)
            self.accountSendsPerSecond = max(0, accountSendsPerSecond)
            self.pingInterval = pingInterval
            self.maxGroupChangeAccounts = maxGroupChangeAccounts
            self.maxFrameBytes = maxFrameBytes
            self.maxBodyBytes = maxBodyBytes
            self.maxPageSize = maxPageSize
            self.outboundQueueFrames = outboundQueueFrames
            self.outboundQueueBytes = outboundQueueBytes
            self.authTimeout = authTimeout
            self.requestHeadTimeout = requestHeadTimeout
            self.maxRequestHeadBytes = maxRequestHeadBytes
            self.httpIdleTimeout = httpIdleTimeout
            self.maxRESTBodyBytes = maxRESTBodyBytes
            self.maxConnections = maxConnections
            self.failedConnectsPerConnection = failedConnectsPerConnection
        }
        /// A WebSocket message above this closes the connection (close code 1009); between `maxFrameBytes` and
        /// this it is answered with `frame.tooLarge` and the connection stays up.
        package var hardFrameBytes: Int { max(maxFrameBytes * 4, 1 << 20) }
        /// Most body bytes in one `sync` or `history` ack (at least one message is always sent).
        var maxPageBytes: Int { 4 << 20 }
    }

    /// Client tokens (RFC 8725): HS256 only, `exp` required, `nbf` honoured, `crit` refused.
    public struct Tokens: Sendable {
        /// Clock difference tolerated when checking `exp`, `nbf` and `iat`.
        public var leeway: Duration
        /// The longest lifetime a token may have (`exp − iat`, or `exp − now` without `iat`); `nil` for no limit.
        public var maxLifetime: Duration?
        /// Failed `connect`s one address may make per minute before its connects are refused with `auth.throttled`;
        /// 0 turns the limit off (behind a proxy, where every client has the proxy's address).
        public var failedConnectsPerMinutePerAddress: Int
        /// Whether a token without `kid`, signed with the app secret as before signing keys (ADR 0048), is accepted.
        public var acceptsAppSecretTokens = true
        public init(
            leeway: Duration = .seconds(60),
            maxLifetime: Duration? = nil,
            failedConnectsPerMinutePerAddress: Int = 60
        ) {
            self.leeway = leeway
            self.maxLifetime = maxLifetime
            self.failedConnectsPerMinutePerAddress = failedConnectsPerMinutePerAddress
        }
    }

    /// Group read receipts: who may ask, and in groups of which size (SPEC §5).
    public struct GroupReceipts: Sendable {
        public var requesters: ReceiptRequesters
        /// The largest group in which receipts may be asked; `nil` (the default) for no limit.
        public var maxGroupSize: Int?
        public init(requesters: ReceiptRequesters = .anyMember, maxGroupSize: Int? = nil) {
            self.requesters = requesters
            self.maxGroupSize = maxGroupSize
        }
    }

    public var http: HTTP
    public var limits: Limits
    /// The app secret: signs client tokens (HS256) and authorizes the REST API.
    public var appSecret: AppSecret
    /// Whether reads are shared with peers: each account's choice (default), always, or never.
    public var readReceiptPolicy: ReadReceiptPolicy
    /// How long after sending a message its sender may recall it (default 120 s, NIM's default).
    public var recallWindow: Duration
    /// How long after sending an owner or admin may recall someone else's message in a group (`nil`: the same as
    /// `recallWindow`).
    public var adminRecallWindow: Duration?
    /// How long after sending a message may be edited (ADR 0054; default a day; zero: edits are off for devices, the
    /// app's backend edits with no window unless it gives one).
    public var editWindow: Duration = .seconds(86_400)
    /// Whether a group's owner and admins edit their members' messages (as they recall them); by default only the
    /// sender edits.
    public var adminsEditMessages = false
    public var groupReceipts: GroupReceipts
    public var tokens: Tokens
    /// Webhook delivery (docs/webhooks.md).
    public var webhooks: Webhooks
    /// The proxies whose `X-Forwarded-For` names a connection's client (``TrustedProxies``): what the
    /// failed connect throttle counts and the logs name. None by default: the TCP peer is the client.
    public var trustedProxies = TrustedProxies.none
    /// Whether typing indicators are shown (ADR 0050); when `false`, `typing` is answered `shown: false` and tells
    /// nobody.
    public var typingIndicators = true
    /// How long audit rows are kept (ADR 0048); `nil` keeps them.
    public var auditRetention: Duration? = .seconds(365 * 86_400)
    /// Files stored by Courier (docs/media.md); `nil`: the media endpoints answer 404 (an embedded server without a
    /// data folder).
    public var media: Media? = nil
    /// Server time; injected so that tests control it.
    public var now: @Sendable () -> Timestamp
    /// Test seams; none in a running server.
    public var hooks = Hooks()
    /// The log level in force, changeable while the server runs (`PUT /v1/server/log-level`); the command's log
    /// handlers read it.
    public var logLevel = LogLevelControl()
    /// Settings the command resolved that the node itself does not hold (data folder, store, durability, logs,
    /// drain, configuration file), by flag name, shown by `GET /v1/server/configuration`. Secrets masked.
    public var startup: [String: String] = [:]

    public init(
        http: HTTP = HTTP(),
        limits: Limits = Limits(),
        appSecret: AppSecret,
        readReceiptPolicy: ReadReceiptPolicy = .userChoice,
        recallWindow: Duration = .seconds(120),
        adminRecallWindow: Duration? = nil,
        groupReceipts: GroupReceipts = GroupReceipts(),
        tokens: Tokens = Tokens(),
        webhooks: Webhooks = Webhooks(),
        now: @escaping @Sendable () -> Timestamp = { Timestamp.now() }
    ) {
        self.webhooks = webhooks
        self.adminRecallWindow = adminRecallWindow
        self.groupReceipts = groupReceipts
        self.tokens = tokens
        self.recallWindow = recallWindow
        self.http = http
        self.limits = limits
        self.appSecret = appSecret
        self.readReceiptPolicy = readReceiptPolicy
        self.now = now
    }

    /// Where a test may hold a request: between the checks a service makes and the transaction that writes, so that
    /// another request can run in between (every decision that depends on stored state must still come out right,
    /// being made from what that transaction reads).
    public struct Hooks: Sendable {
        public enum Point: Sendable, Hashable {
            /// A send, after its checks, before its append.
            case send
            /// A recall, after its checks, before its transaction.
            case recall
            /// An edit, after its checks, before its transaction.
            case edit
            /// A reaction added or removed, after its checks, before its transaction.
            case react
            /// A change of an account's view (`changeView`), after its checks, before its transaction.
            case changeView
        }
        /// Awaited at each point.
        public var beforeWrite: (@Sendable (Point) async -> Void)?
        /// Awaited before this node fans out each change another node committed (several nodes): a test holds them
        /// to play a notification that has not arrived yet.
        public var beforeFanOut: (@Sendable () async -> Void)?
        public init(
            beforeWrite: (@Sendable (Point) async -> Void)? = nil,
            beforeFanOut: (@Sendable () async -> Void)? = nil
        ) {
            self.beforeWrite = beforeWrite
            self.beforeFanOut = beforeFanOut
        }
    }

    /// How webhooks are delivered.
    public struct Webhooks: Sendable {
        /// How long a delivery is retried before it is kept as failed (24 h).
        public var retry: WebhookRetryPolicy
        /// The longest one attempt may take, connecting included.
        public var attemptTimeout: Duration
        /// Requests under way at once to one endpoint (its conversations side by side, each in order on a connection
        /// of its own).
        public var maxInFlightPerEndpoint: Int
        /// The most parked deliveries of one conversation one retry sends, one after the other (one look and one
        /// recorded outcome for all of them).
        public var runLength: Int
        /// How long after a message `message.undelivered` looks for recipients who have it on no device (online
        /// devices report delivery within about 50 ms).
        public var pushDelay: Duration
        /// The most recipients one `message.undelivered` event carries; the rest are paged through the REST API.
        public var pushRecipientsPerEvent: Int
        /// How often the node looks for due deliveries when nothing told it of new ones (other nodes' events,
        /// retries that came due).
        public var pollInterval: Duration
        /// How long delivered and failed deliveries stay listed (and retryable, for failed ones) after they finished;
        /// then the node deletes them (7 days). Pending deliveries are kept however old.
        public var retention: Duration
        /// Whether endpoints may be on loopback, private, unspecified, multicast or reserved addresses (a receiver on
        /// the same host or network; `--webhook-allow-private`). Link-local and cloud metadata addresses are refused
        /// whatever this says. Checked when an endpoint's URL is set and on each delivery's connection.
        public var allowPrivateAddresses: Bool
        public init(
            retry: WebhookRetryPolicy = WebhookRetryPolicy(),
            attemptTimeout: Duration = .seconds(10),
            maxInFlightPerEndpoint: Int = 16,
            runLength: Int = 32,
            pushDelay: Duration = .seconds(2),
            pushRecipientsPerEvent: Int = 100,
            pollInterval: Duration = .milliseconds(500),
            retention: Duration = .seconds(7 * 86_400),
            allowPrivateAddresses: Bool = false
        ) {
            self.allowPrivateAddresses = allowPrivateAddresses
            self.retention = retention
            self.pushDelay = pushDelay
            self.pushRecipientsPerEvent = pushRecipientsPerEvent
            self.runLength = runLength
            self.retry = retry
            self.attemptTimeout = attemptTimeout
            self.maxInFlightPerEndpoint = maxInFlightPerEndpoint
            self.pollInterval = pollInterval
        }
    }

    package var serverLimits: ServerLimits {
        ServerLimits(
            maxFrameBytes: limits.maxFrameBytes,
            maxBodyBytes: limits.maxBodyBytes,
            maxPageSize: limits.maxPageSize,
            outboundQueueFrames: limits.outboundQueueFrames,
            outboundQueueBytes: limits.outboundQueueBytes,
            maxRequestsInFlight: limits.maxRequestsInFlight,
            recallWindowMilliseconds: recallWindow.milliseconds,
            managerRecallWindowMilliseconds: (adminRecallWindow ?? recallWindow).milliseconds,
            editWindowMilliseconds: editWindow.milliseconds
        )
    }
}

extension Timestamp {
    /// The wall clock, in milliseconds since the epoch.
    public static func now() -> Timestamp {
        Timestamp(milliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
    }
}

/// What this build of the server is.
public enum CourierBuild {
    /// The server's release (`courier-server --version`, `courier_build_info`); the REST API and the protocol have
    /// versions of their own (`/v1`).
    public static let version = "0.3.0"
}

extension CourierServerConfiguration {
    /// Files stored by Courier (docs/media.md, ADR 0032).
    public struct Media: Sendable {
        /// Where the bytes live.
        public enum Place: Sendable {
            /// A folder on this node (one node only).
            case folder(String)
            /// An S3-compatible bucket every node shares; uploads arrive in `incoming`, a folder on this node.
            case s3(S3Settings, incoming: String)
        }

        public var place: Place
        /// Largest file accepted (`media.tooLarge`, 413, past it).
        public var maxBytes: Int
        /// The content types accepted: exact (`application/pdf`) or a whole family (`image/*`).
        public var types: [String]
        /// How long a file no message refers to is kept before it is collected.
        public var grace: Duration
        /// How often the collector runs (and erased files' bytes are deleted, besides right after a recall).
        public var collectInterval: Duration

        public static let defaultTypes = [
            "image/*", "video/*", "audio/*", "text/plain", "application/pdf", "application/zip",
            "application/octet-stream",
        ]

        public init(
            place: Place,
            maxBytes: Int = 25 * 1024 * 1024,
            types: [String] = Self.defaultTypes,
            grace: Duration = .seconds(24 * 3600),
            collectInterval: Duration = .seconds(3600)
        ) {
            self.place = place
            self.maxBytes = maxBytes
            self.types = types
            self.grace = grace
            self.collectInterval = collectInterval
        }

        /// Whether `contentType` (parameters ignored) is one of ``types``.
        package func allows(_ contentType: String) -> Bool {
            let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                ?? ""
            let parts = type.split(separator: "/")
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
            return types.contains { allowed in
                let allowed = allowed.lowercased()
                return allowed == type || allowed == "*/*" || (allowed.hasSuffix("/*") && allowed.dropLast(2) == parts[0])
            }
        }
    }
}
