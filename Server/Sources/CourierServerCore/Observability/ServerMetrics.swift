// Courier — Apache-2.0
package import CoreMetrics
package import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation
internal import NIOCore
internal import Prometheus
#if canImport(Glibc)
internal import Glibc
#endif

/// The server's metrics, recorded through swift-metrics and exported by swift-prometheus in the Prometheus text
/// format at `GET /metrics` (docs/operations.md lists them).
///
/// Each server has its own registry instead of the process-wide `MetricsSystem`: several servers in one process (the
/// tests, an embedding app) each count their own, and bootstrapping metrics stays the embedding app's choice. The
/// metrics of the request path are created once, per request type, so recording one is an atomic add or one
/// histogram update, never a registry lookup.
package final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    /// Open WebSocket connections, authenticated or not.
    package let connections: Meter
    /// Authenticated devices.
    package let devicesOnline: Meter
    /// Frames written to devices (acks, errors and events).
    package let framesOut: CoreMetrics.Counter
    /// Devices cut off because they did not read their queue (SPEC §9.9).
    package let slowConsumerDisconnects: CoreMetrics.Counter
    /// `sync` pages served, and the entries they carried.
    package let syncPages: CoreMetrics.Counter
    package let syncMessages: CoreMetrics.Counter
    /// Webhook deliveries waiting (all endpoints), as last counted by this node.
    package let webhookBacklog: Meter
    /// Time from an event's commit to its delivery.
    let webhookLag: CoreMetrics.Timer
    /// Operations per committed transaction (SQLite's group commit batch; 1 on PostgreSQL), and its latency.
    let commitOperations: CoreMetrics.Recorder
    let commitDuration: CoreMetrics.Timer
    /// Frames and bytes waiting in devices' outbound queues, summed and for the deepest queue; set when scraped.
    let outboundQueueFrames: Meter
    let outboundQueueBytes: Meter
    let outboundQueueMaxFrames: Meter
    /// PostgreSQL: from another node queuing a change's notification to this node having fanned it out.
    let changeFeedLag: CoreMetrics.Timer

    private let factory: PrometheusMetricsFactory
    private let framesIn: [FrameType: CoreMetrics.Counter]
    private let invalidFramesIn: CoreMetrics.Counter
    private let requestDurations: [FrameType: CoreMetrics.Timer]
    // `Locked`, not `Mutex`: ThreadSanitizer does not see `Mutex`'s futex hand-offs on Linux (a false report in CI's step).
    private let errors = Locked<[ErrorCode: CoreMetrics.Counter]>([:])
    /// The pool's timeouts already counted into `courier_store_connection_timeouts_total`.
    private let storeTimeouts = Locked(0)

    /// Every request type of the protocol (docs/protocol.md §4).
    static let requestTypes: [FrameType] = [
        .connect, .send, .sync, .history, .deliver, .read, .readReceiptSettings, .unread, .recall, .edit, .react, .reactions, .reactionList,
        .createGroup, .groupChange, .groupMembers, .requestReadReceipts, .receiptCounts, .receiptList, .pushToken, .changeView,
        .typing, .typingSettings, .setAccountProfile, .accountProfiles, .ping,
    ]

    package init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Request latencies from 100 µs (a cached read) to 10 s (a request stuck behind a slow disk).
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(10),
        ]
        // A group commit carries 1 to 256 operations (`GroupCommit.maxGroupSize`).
        factory.valueHistogramBuckets["courier_commit_operations"] = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        self.registry = registry
        self.factory = factory
        commitOperations = CoreMetrics.Recorder(label: "courier_commit_operations", factory: factory)
        commitDuration = CoreMetrics.Timer(label: "courier_commit_duration_seconds", factory: factory)
        outboundQueueFrames = Meter(label: "courier_outbound_queue_frames", factory: factory)
        outboundQueueBytes = Meter(label: "courier_outbound_queue_bytes", factory: factory)
        outboundQueueMaxFrames = Meter(label: "courier_outbound_queue_max_frames", factory: factory)
        changeFeedLag = CoreMetrics.Timer(label: "courier_change_feed_lag_seconds", factory: factory)
        connections = Meter(label: "courier_connections", factory: factory)
        devicesOnline = Meter(label: "courier_devices_online", factory: factory)
        framesOut = CoreMetrics.Counter(label: "courier_frames_out_total", factory: factory)
        slowConsumerDisconnects = CoreMetrics.Counter(
            label: "courier_slow_consumer_disconnects_total",
            factory: factory
        )
        syncPages = CoreMetrics.Counter(label: "courier_sync_pages_total", factory: factory)
        syncMessages = CoreMetrics.Counter(label: "courier_sync_messages_total", factory: factory)
        webhookBacklog = Meter(label: "courier_webhook_backlog", factory: factory)
        webhookLag = CoreMetrics.Timer(label: "courier_webhook_lag_seconds", factory: factory)
        Meter(label: "courier_build_info", dimensions: [("version", CourierBuild.version)], factory: factory).set(1)
        var framesIn: [FrameType: CoreMetrics.Counter] = [:]
        var requestDurations: [FrameType: CoreMetrics.Timer] = [:]
        for type in Self.requestTypes {
            framesIn[type] = CoreMetrics.Counter(
                label: "courier_frames_in_total",
                dimensions: [("type", type.rawValue)],
                factory: factory
            )
            requestDurations[type] = CoreMetrics.Timer(
                label: "courier_request_duration_seconds",
                dimensions: [("type", type.rawValue)],
                factory: factory
            )
        }
        self.framesIn = framesIn
        self.requestDurations = requestDurations
        invalidFramesIn = CoreMetrics.Counter(
            label: "courier_frames_in_total",
            dimensions: [("type", "invalid")],
            factory: factory
        )
        // The labelled counters an alert watches exist from the first scrape, at 0 (`increase(…[1h]) > 0` has
        // nothing to compare with until a series exists): the webhook counters for every event type, and the errors
        // that mean the server failed rather than the request.
        for type in (WebhookEventType.all + [.messageUndelivered]).map(\.rawValue) {
            for label in ["courier_webhook_deliveries_total", "courier_webhook_failed_attempts_total", "courier_webhook_failures_total"] {
                _ = CoreMetrics.Counter(label: label, dimensions: [("type", type)], factory: factory)
            }
        }
        for code in Self.alertedErrors { error(code, by: 0) }
    }

    /// Error codes whose counters exist from the start (the ones operations.md's alerts watch).
    static let alertedErrors: [ErrorCode] = [.internal, .authThrottled]

    /// A frame arrived: its request type, or `nil` when it could not be decoded.
    package func frameIn(_ type: FrameType?) {
        guard let type, let counter = framesIn[type] else { return invalidFramesIn.increment() }
        counter.increment()
    }

    /// A request of `type` was answered after `duration` (from its decoding to its reply being queued).
    package func request(_ type: FrameType, took duration: Duration) {
        requestDurations[type]?.recordNanoseconds(TimeAmount(duration).nanoseconds)
    }

    /// A device was answered with an error `code`.
    package func error(_ code: ErrorCode, by amount: Int = 1) {
        let counter = errors.withLock { counters in
            if let counter = counters[code] { return counter }
            let counter = CoreMetrics.Counter(
                label: "courier_errors_total",
                dimensions: [("code", code.rawValue)],
                factory: factory
            )
            counters[code] = counter
            return counter
        }
        counter.increment(by: amount)
    }

    /// A transaction committed (see ``CommitRecord``).
    package func committed(_ commit: CommitRecord) {
        commitOperations.record(commit.operations)
        commitDuration.recordNanoseconds(TimeAmount(commit.duration).nanoseconds)
    }

    /// A change from another node was fanned out; `publishedAt` is when that node notified it (microseconds since
    /// 1970). A negative lag (the other node's clock is ahead) counts as none.
    func changeFannedOut(publishedAt: Int64?) {
        guard let publishedAt else { return }
        let now = Int64((Date().timeIntervalSince1970 * 1_000_000).rounded())
        changeFeedLag.recordMicroseconds(max(0, now - publishedAt))
    }

    /// A webhook delivered, `lagMilliseconds` after its change committed.
    package func webhookDelivered(_ type: String, lagMilliseconds: Int64) {
        CoreMetrics.Counter(label: "courier_webhook_deliveries_total", dimensions: [("type", type)], factory: factory)
            .increment()
        webhookLag.recordMilliseconds(lagMilliseconds)
    }

    /// A webhook attempt that failed; `final` when the delivery is now kept as failed.
    package func webhookFailedAttempt(_ type: String, final: Bool) {
        CoreMetrics.Counter(
            label: "courier_webhook_failed_attempts_total",
            dimensions: [("type", type)],
            factory: factory
        ).increment()
        if final {
            CoreMetrics.Counter(label: "courier_webhook_failures_total", dimensions: [("type", type)], factory: factory)
                .increment()
        }
    }

    /// The store's connections as they are now (set at each scrape): `courier_store_reachable` on every backend, the
    /// pool's gauges and its timeouts on PostgreSQL.
    package func store(_ statistics: ConnectionStatistics) {
        Meter(label: "courier_store_reachable", factory: factory).set(statistics.reachable ? 1 : 0)
        guard let pool = statistics.pool else { return }
        Meter(label: "courier_store_connections_in_use", factory: factory).set(pool.inUse)
        Meter(label: "courier_store_connections_waiting", factory: factory).set(pool.waiting)
        let counted = storeTimeouts.withLock { counted in
            defer { counted = max(counted, pool.timeouts) }
            return counted
        }
        CoreMetrics.Counter(label: "courier_store_connection_timeouts_total", factory: factory)
            .increment(by: max(0, pool.timeouts - counted))
    }

    /// The webhook deliveries waiting now, all endpoints.
    package func webhookBacklog(_ pending: Int) { webhookBacklog.set(pending) }

    /// An HTTP request was answered with `status` after `duration`; `route` is the path template it matched
    /// (`/v1/accounts/{account}`, so one series per operation, never per account), `unmatched` for none.
    func httpRequest(method: String, route: String, status: Int, took duration: Duration) {
        CoreMetrics.Counter(
            label: "courier_http_requests_total",
            dimensions: [("method", method), ("route", route), ("status", String(status))],
            factory: factory
        ).increment()
        CoreMetrics.Timer(
            label: "courier_http_request_duration_seconds",
            dimensions: [("route", route)],
            factory: factory
        ).recordNanoseconds(TimeAmount(duration).nanoseconds)
    }

    /// The Prometheus text exposition of every metric; `queues` are the devices' outbound queues at this moment
    /// (read here rather than counted per frame, which would put a shared counter on every frame's path).
    package func exposition(queues: OutboundQueues) -> [UInt8] {
        outboundQueueFrames.set(queues.frames)
        outboundQueueBytes.set(queues.bytes)
        outboundQueueMaxFrames.set(queues.maxFrames)
        return Self.addingHelp(to: registry.emitToBuffer()) + Array(ProcessStats.read(startedAt: startedAt).exposition.utf8)
    }

    /// When this server's metrics began (`process_start_time_seconds`).
    private let startedAt = Date().timeIntervalSince1970

    /// The exposition with a `# HELP` line before each family's `# TYPE` line (swift-metrics has no place for help
    /// text, so it is added here, from ``help``).
    static func addingHelp(to exposition: [UInt8]) -> [UInt8] {
        var text = ""
        text.reserveCapacity(exposition.count + 4096)
        for line in String(decoding: exposition, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
                let help = help[String(name)]
            {
                text += "# HELP \(name) \(help)\n"
            }
            text += line
            text += "\n"
        }
        return Array(text.dropLast().utf8)
    }

    /// What each family counts (docs/operations.md has the same, with labels and queries).
    static let help: [String: String] = [
        "courier_build_info": "The server's version (the value is always 1).",
        "courier_connections": "Open WebSocket connections, authenticated or not.",
        "courier_devices_online": "Authenticated devices connected to this node.",
        "courier_frames_in_total": "Frames received from devices, by request type (invalid: not a request).",
        "courier_frames_out_total": "Frames written to devices: acks, errors and events.",
        "courier_request_duration_seconds": "From a device request's decoding to its reply being queued.",
        "courier_errors_total": "Error frames sent to devices, by error code.",
        "courier_http_requests_total": "HTTP requests answered, by method, route template and status.",
        "courier_http_request_duration_seconds": "From an HTTP request's head to its answer, by route template.",
        "courier_slow_consumer_disconnects_total": "Devices cut off because they did not read their outbound queue.",
        "courier_outbound_queue_frames": "Frames waiting in the devices' outbound queues, all devices.",
        "courier_outbound_queue_bytes": "Bytes of the frames waiting in the devices' outbound queues.",
        "courier_outbound_queue_max_frames": "Frames waiting for the one device furthest behind.",
        "courier_commit_operations": "Write operations per committed transaction (the group commit's batch).",
        "courier_commit_duration_seconds": "From handing a transaction to the database to its commit, the fsync included.",
        "courier_change_feed_lag_seconds": "From another node's change notification to its fan-out on this node.",
        "courier_sync_pages_total": "Sync pages served.",
        "courier_sync_messages_total": "Log entries carried by sync pages.",
        "courier_webhook_deliveries_total": "Webhook deliveries answered 2xx, by event type.",
        "courier_webhook_failed_attempts_total": "Webhook attempts that failed and will be retried, by event type.",
        "courier_webhook_failures_total": "Webhook deliveries kept as failed after the retry period, by event type.",
        "courier_webhook_lag_seconds": "From a change's commit to the endpoint's 2xx.",
        "courier_webhook_backlog": "Webhook deliveries waiting, all endpoints.",
    ]
}

/// The process's own figures, read from `/proc` when scraped, under the names Prometheus's client libraries use
/// (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, `process_max_fds`,
/// `process_start_time_seconds`), so the usual dashboards work.
struct ProcessStats {
    var cpuSeconds: Double?
    var residentBytes: Int?
    var openFiles: Int?
    var maxFiles: Int?
    var startedAt: Double

    static func read(startedAt: Double) -> ProcessStats {
        var stats = ProcessStats(startedAt: startedAt)
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            if fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]), ticks > 0 {
                stats.cpuSeconds = (user + system) / ticks
            }
        }
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kib = Int(line.split(separator: " ").dropFirst().first ?? "")
        {
            stats.residentBytes = kib * 1024
        }
        stats.openFiles = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { stats.maxFiles = Int(clamping: limit.rlim_cur) }
        return stats
    }

    /// The Prometheus text of these figures (each with its `# HELP` and `# TYPE`).
    var exposition: String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ value: String?) {
            guard let value else { return }
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", cpuSeconds.map { "\($0)" })
        family("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes.", residentBytes.map(String.init))
        family("process_open_fds", "gauge", "Open file descriptors (connections included).", openFiles.map(String.init))
        family("process_max_fds", "gauge", "The open-files limit.", maxFiles.map(String.init))
        family("process_start_time_seconds", "gauge", "When the server started, in seconds since 1970.", "\(startedAt)")
        return text
    }
}
