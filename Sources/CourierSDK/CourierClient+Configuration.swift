// Courier — Apache-2.0
public import Foundation
public import Logging
public import CourierWire

extension CourierClient {
    /// How a client connects and behaves (Stream's `ChatClientConfig` style: a plain struct).
    public struct Configuration: Sendable {
        /// Where the local store lives.
        public enum StoreLocation: Sendable, Hashable {
            /// A SQLite file per account in this folder (`account-<id>.sqlite`, created on first use), opened once
            /// the client knows its account: from ``CourierClient/init(account:configuration:)`` or the first
            /// ``CourierClient/connect(account:token:)``. Works offline across launches, and the app can sign in as
            /// another account with a new client.
            case directory(URL)
            /// One SQLite file (created with its folder on first use), for one account. Works offline across launches.
            case file(URL)
            /// A private in-memory store, for tests and previews.
            case inMemory

            /// The default: a file per account in the app's own data folder — on Apple platforms
            /// `Application Support/Courier/` (backed up with the app, never purged by the system), on Linux
            /// `$XDG_DATA_HOME/courier/` (`~/.local/share/courier/` when that variable is unset).
            public static var automatic: StoreLocation { .directory(defaultDirectory) }

            static var defaultDirectory: URL {
                #if canImport(Darwin)
                let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
                return base.appendingPathComponent("Courier", isDirectory: true)
                #else
                let environment = ProcessInfo.processInfo.environment
                let base =
                    environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
                    ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share")
                return base.appendingPathComponent("courier", isDirectory: true)
                #endif
            }
        }

        /// The server's WebSocket endpoint, e.g. `ws://127.0.0.1:8080/v1/ws`.
        public var serverURL: URL
        /// Other nodes of the same deployment, tried in turn when a connection attempt fails (for deployments without
        /// a load balancer in front of the nodes).
        public var alternateServerURLs: [URL]
        /// Where the local store lives; ``StoreLocation/automatic`` by default.
        public var store: StoreLocation
        /// Whether the SDK acknowledges delivery of received messages: the recipient's switch, on by default (Agora's
        /// `enableDeliveryAck` is set per client too, off by default there; a Courier sender has nothing to enable).
        public var sendsDeliveryReceipts: Bool
        /// Delivery receipts are batched per conversation and sent at most once per interval.
        public var deliveryReceiptInterval: Duration
        /// How long a call that needs the server's answer (history, receipt lists, group management, a read or view
        /// change made while connected) waits for it. Sends do not wait: they return once queued (``SendHandle``).
        public var requestTimeout: Duration
        /// How long ``CourierClient/connect(account:token:)`` waits for the first connection.
        public var connectTimeout: Duration
        /// Delays between reconnection attempts.
        public var reconnectBackoff: Backoff
        /// This device's id; `nil` keeps a random one in the local store.
        public var deviceID: DeviceID?
        /// The SDK logs at trace/debug/info only; no-op by default.
        public var logger: Logger
        /// The transport; WebSocket by default.
        public var transport: any Transport
        /// The clock for timeouts, batching and backoff (tests inject their own).
        public var clock: any Clock<Duration>
        /// How much history a new install downloads: until its first sync completes, a conversation starts at its
        /// newest `initialSyncLimit` entries, or earlier so that every unread entry is held (unread counts stay exact).
        /// Older entries come from ``CourierClient/history(in:before:limit:)`` (NIM "roaming" messages; a recall met
        /// there arrives as ``RecallNotice/Arrival-swift.enum/roaming``). `nil` downloads every conversation's whole
        /// history. Once synced, a device always gets everything it missed. Default: 100.
        public var initialSyncLimit: Int?
        /// How long after live traffic (messages, receipts, sends) the client moves its sync cursor forward with a
        /// short `sync` that names only the conversations that traffic touched (ADR 0017): a reconnect then costs what
        /// changed while the device was away, not everything since it connected. `nil`: only connecting syncs.
        /// Default: 30 s.
        public var syncCheckpointInterval: Duration?
        /// Uploads the files of attachments you send from this device (an ``Attachment`` whose `url` is a `file:` URL):
        /// run from the outbox before the message is sent, so a message goes out once, with the address the upload
        /// returned. `nil` (the default): the file is uploaded to the Courier server's media (docs/media.md), into the
        /// message's conversation, with the account's token. See ``AttachmentUploader``.
        public var attachmentUploader: (any AttachmentUploader)? = nil
        /// How many times an upload is tried, with ``reconnectBackoff``'s delays between, before its message is
        /// marked failed (``CourierClient/retryFailedMessage(_:)`` tries again). Default: 3.
        public var uploadAttempts = 3

        public init(
            serverURL: URL,
            alternateServerURLs: [URL] = [],
            store: StoreLocation = .automatic,
            sendsDeliveryReceipts: Bool = true,
            deliveryReceiptInterval: Duration = .milliseconds(50),
            requestTimeout: Duration = .seconds(15),
            connectTimeout: Duration = .seconds(30),
            reconnectBackoff: Backoff = Backoff(),
            deviceID: DeviceID? = nil,
            logger: Logger = Logger(label: "courier.sdk", factory: { _ in SwiftLogNoOpLogHandler() }),
            transport: any Transport = WebSocketTransport(),
            clock: any Clock<Duration> = ContinuousClock(),
            initialSyncLimit: Int? = 100,
            syncCheckpointInterval: Duration? = .seconds(30)
        ) {
            self.serverURL = serverURL
            self.alternateServerURLs = alternateServerURLs
            self.store = store
            self.sendsDeliveryReceipts = sendsDeliveryReceipts
            self.deliveryReceiptInterval = deliveryReceiptInterval
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.reconnectBackoff = reconnectBackoff
            self.deviceID = deviceID
            self.logger = logger
            self.transport = transport
            self.clock = clock
            self.initialSyncLimit = initialSyncLimit
            self.syncCheckpointInterval = syncCheckpointInterval
        }
    }
}
