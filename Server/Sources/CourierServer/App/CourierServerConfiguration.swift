// Courier — Apache-2.0
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

    /// Published limits (see docs/protocol.md). Every queue is bounded.
    public struct Limits: Sendable {
        /// Largest client frame accepted and answered; larger ones get `frame.tooLarge`.
        public var maxFrameBytes: Int
        /// Largest message body (UTF-8 bytes); larger ones get `message.bodyTooLarge`.
        public var maxBodyBytes: Int
        /// Most messages in one `sync` or `history` ack.
        public var maxPageSize: Int
        /// Frames queued for one device; past that the device is disconnected (it reconnects and syncs).
        public var outboundQueueFrames: Int
        /// Time a new connection has to send `connect`.
        public var authTimeout: Duration
        /// Most accounts named in one `createGroup` or `groupChange` (a larger group is built in several).
        public var maxGroupChangeAccounts: Int
        public init(
            maxFrameBytes: Int = 256 * 1024,
            maxBodyBytes: Int = 64 * 1024,
            maxPageSize: Int = 500,
            outboundQueueFrames: Int = 4096,
            authTimeout: Duration = .seconds(10),
            maxGroupChangeAccounts: Int = 1000
        ) {
            self.maxGroupChangeAccounts = maxGroupChangeAccounts
            self.maxFrameBytes = maxFrameBytes
            self.maxBodyBytes = maxBodyBytes
            self.maxPageSize = maxPageSize
            self.outboundQueueFrames = outboundQueueFrames
            self.authTimeout = authTimeout
        }
        /// A WebSocket message above this closes the connection (close code 1009); between `maxFrameBytes` and
        /// this it is answered with `frame.tooLarge` and the connection stays up.
        var hardFrameBytes: Int { max(maxFrameBytes * 4, 1 << 20) }
        /// Most body bytes in one `sync` or `history` ack (at least one message is always sent).
        var maxPageBytes: Int { 4 << 20 }
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
    public var groupReceipts: GroupReceipts
    /// Server time; injected so that tests control it.
    public var now: @Sendable () -> Timestamp

    public init(
        http: HTTP = HTTP(),
        limits: Limits = Limits(),
        appSecret: AppSecret,
        readReceiptPolicy: ReadReceiptPolicy = .userChoice,
        recallWindow: Duration = .seconds(120),
        adminRecallWindow: Duration? = nil,
        groupReceipts: GroupReceipts = GroupReceipts(),
        now: @escaping @Sendable () -> Timestamp = { Timestamp.now() }
    ) {
        self.adminRecallWindow = adminRecallWindow
        self.groupReceipts = groupReceipts
        self.recallWindow = recallWindow
        self.http = http
        self.limits = limits
        self.appSecret = appSecret
        self.readReceiptPolicy = readReceiptPolicy
        self.now = now
    }

    var serverLimits: ServerLimits {
        ServerLimits(
            maxFrameBytes: limits.maxFrameBytes,
            maxBodyBytes: limits.maxBodyBytes,
            maxPageSize: limits.maxPageSize,
            outboundQueueFrames: limits.outboundQueueFrames
        )
    }
}

extension Timestamp {
    /// The wall clock, in milliseconds since the epoch.
    public static func now() -> Timestamp {
        Timestamp(milliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
    }
}
