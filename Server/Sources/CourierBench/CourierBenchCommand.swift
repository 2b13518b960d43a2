// Courier — Apache-2.0
import CourierHarness
import ArgumentParser
import CourierServer
import Foundation

@main
struct CourierBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier-bench",
        abstract: "Measures a courier-server: throughput, latency, CPU and memory. Run it release-built.",
        subcommands: [
            Direct.self, Group.self, Recall.self, Connections.self, Sync.self, Reconnect.self, Import.self, Typing.self,
            Reactions.self,
        ]
    )
}

struct BenchOptions: ParsableArguments {
    @Option(help: "Benchmark a running server at this ws:// URL instead of starting one.") var server: String?
    @Option(help: "The pid of the server given with --server (for CPU and memory figures).") var serverPid: Int32?
    @Option(help: "The courier-server binary to start (default: next to courier-bench).") var serverBinary: String?
    @Option(help: "Start the server on this PostgreSQL database instead of SQLite.") var postgresURL: String?
    @Option(help: "Stop after this many seconds.") var maxSeconds: Double = 600
    @Option(help: "The started server's --durability: full (the default) or normal (the faster opt-in).")
    var durability = "full"

    func validate() throws {
        guard maxSeconds > 0 else { throw ValidationError("Need --max-seconds > 0.") }
        guard ["full", "normal"].contains(durability) else { throw ValidationError("--durability is full or normal.") }
        if let webhookFailSeconds, webhookFailSeconds < 0 || !webhooks {
            throw ValidationError("--webhook-fail-seconds needs --webhooks and a number of seconds ≥ 0.")
        }
        if server != nil, serverBinary != nil || postgresURL != nil {
            throw ValidationError("--server benchmarks a running server: drop --server-binary and --postgres-url.")
        }
    }
    @Flag(help: "Print one JSON object instead of a table.") var json = false
    @Flag(help: "Attach a local webhook receiver for every event type; report its lag (direct: and wait for it).")
    var webhooks = false
    @Option(
        help: "With --webhooks: the event types the receiver subscribes to, comma-separated (default: every type).")
    var webhookEvents: String?
    @Option(help: "With --webhooks: the endpoint's batch (events of one conversation per request, 1–100; default one, unbatched).")
    var webhookBatch: Int?
    @Option(help: "With --webhooks: the receiver answers 503 for this many seconds from the start (an endpoint that is down), then 204.")
    var webhookFailSeconds: Int?

    @Option(help: "Every rate limit of the server it starts, per second (default: off, since a bench drives each device far past a person's pace; 1000000 runs the limiter without refusing, to measure its cost).")
    var rateLimit: Int?

    /// Starts (or attaches to) the server, runs `scenario`, prints the report and stops the server.
    func measure(
        expectedMessages: Int? = nil,
        _ scenario: @Sendable (BenchContext) async throws -> Report
    ) async throws {
        raiseFileLimit()
        let secret = ProcessInfo.processInfo.environment["COURIER_APP_SECRET"] ?? AppSecret.random().value
        let process: ServerProcess
        if let server {
            process = ServerProcess(url: server, pid: serverPid ?? 0, secret: secret)
        } else {
            let binary =
                serverBinary ?? (CommandLine.arguments[0] as NSString).deletingLastPathComponent + "/courier-server"
            var launch = ServerProcess.Launch(binary: binary, arguments: ["--durability", durability])
            // The --webhooks receiver listens on 127.0.0.1.
            if webhooks { launch.arguments += ["--webhook-allow-private", "true"] }
            if let postgresURL { launch.environment["COURIER_POSTGRES_URL"] = postgresURL }
            if let rateLimit {
                for name in ServerProcess.rateLimitVariables { launch.environment[name] = String(rateLimit) }
            }
            process = try ServerProcess(launch, secret: secret)
        }
        defer { process.stop() }
        let tokens = await TokenAuthority(secret: try AppSecret(secret))
        let context = BenchContext(server: process, tokens: tokens, deadline: nowMilliseconds() + maxSeconds * 1000)
        var sink: WebhookSink?
        if webhooks {
            let receiver = try await WebhookSink(failFor: .seconds(webhookFailSeconds ?? 0))
            let filter = webhookEvents.map { list in
                #","events":["# + list.split(separator: ",").map { #""\#($0)""# }.joined(separator: ",") + "]"
            } ?? ""
            let batch = webhookBatch.map { #","batch":\#($0)"# } ?? ""
            let body = #"{"url":"http://127.0.0.1:\#(receiver.port)/hooks""# + filter + batch + "}"

            let (status, _) = try await process.rest("POST", "/v1/webhooks", json: Data(body.utf8))
            guard status == 201 else { throw HarnessError.refused("POST /v1/webhooks answered \(status)") }
            sink = receiver
        }
        defer { sink?.stop() }
        let benchCPUBefore = Self.processCPUSeconds()
        var report = try await scenario(context)
        // This process's own CPU over the run (its clients and, with --webhooks, the receiver), on the same cores as
        // the server: what the server's figures share the machine with.
        if let expectedMessages {
            report["bench_cpu_sec_per_1k"] = .number(
                ((Self.processCPUSeconds() - benchCPUBefore) / Double(expectedMessages) * 1000 * 1000).rounded() / 1000
            )
        }
        if let sink {
            // The backlog left when the last message was acknowledged, drained (bounded by --max-seconds).
            let ended = nowMilliseconds()
            if let expectedMessages {
                let remaining = max(1, context.deadline - ended)
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await sink.waitForCreated(expectedMessages) }
                    group.addTask { try? await Task.sleep(for: .milliseconds(Int64(remaining))) }
                    await group.next()
                    group.cancelAll()
                }
                report["webhook_drain_sec"] = .number(((nowMilliseconds() - ended) / 10).rounded() / 100)
            }
            let (events, requests, refused, lags) = sink.figures
            report["webhook_events"] = .integer(events)
            report["webhook_requests"] = .integer(requests)
            if let webhookFailSeconds {
                report["webhook_fail_sec"] = .integer(webhookFailSeconds)
                report["webhook_refused_requests"] = .integer(refused)
            }
            if let webhookBatch { report["webhook_batch"] = .integer(webhookBatch) }
            report["webhook_created_lag_ms"] = .latency(lags)
        }
        // The floor of a durable exchange on this disk: one fdatasync where the server keeps its data (measured after
        // the run, the server idle), so a latency reads as a number of syncs.
        if let floor = Self.fsyncLatencies(in: process.folder ?? NSTemporaryDirectory()) {
            report["fsync_floor_ms"] = .latency(floor)
        }
        report["backend"] = .string(postgresURL == nil ? "sqlite" : "postgres")
        if server == nil { report["durability"] = .string(durability) }
        report["cores"] = .integer(ProcessInfo.processInfo.activeProcessorCount)
        FileHandle.standardOutput.write(Data(((json ? report.json : report.table) + "\n").utf8))
    }

    /// `fdatasync` latencies of 200 writes of 4 KiB to a file in `folder`, overwritten in place as a database's pages
    /// are (the file is removed after); `nil` when the folder cannot be written.
    static func fsyncLatencies(in folder: String) -> Samples? {
        let path = folder + "/fsync-floor-\(getpid()).bench"
        let descriptor = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        guard descriptor >= 0 else { return nil }
        defer {
            close(descriptor)
            unlink(path)
        }
        let page = [UInt8](repeating: 0x5a, count: 4096)
        var samples = Samples()
        for index in 0..<200 {
            let started = nowMilliseconds()
            guard pwrite(descriptor, page, page.count, off_t((index % 16) * 4096)) == page.count,
                fdatasync(descriptor) == 0
            else { return nil }
            samples.add(nowMilliseconds() - started)
        }
        return samples
    }

    /// User and system CPU seconds this process has used.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    private func raiseFileLimit() {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

struct Direct: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "P sender/recipient pairs send N messages in total.")
    @Option var pairs = 50
    @Option var messages = 50_000
    @Option(help: "Sends each sender has in flight (pipelining); 1: one at a time, waiting for each ack.")
    var window = 1
    @Flag(help: "Each recipient reads every message as it arrives (a read per message, up to --window in flight).")
    var readEach = false
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard pairs >= 1, messages >= pairs else {
            throw ValidationError("Need --pairs >= 1 and --messages >= --pairs.")
        }
        guard window >= 1 else { throw ValidationError("Need --window >= 1.") }
    }
    func run() async throws {
        let (pairs, messages, window, readEach) = (self.pairs, self.messages, self.window, self.readEach)
        try await options.measure(expectedMessages: messages) {
            try await DirectScenario.run($0, pairs: pairs, messages: messages, window: window, readEach: readEach)
        }
    }
}

struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One group of M members, K messages asking for read receipts, every member acks every message."
    )
    @Option var members = 100_000
    @Option var messages = 10
    @Option(
        help: """
            How the members ack: 'rest' (the app's backend reads for 1,000 offline members per \
            POST /v1/conversations/{id}/reads), 'connections' (each member connects, acks, closes) or 'online' \
            (--online members stay connected and read the conversation once per --batch messages).
            """
    )
    var acks = GroupScenario.AckPath.rest
    @Option(help: "Requests (rest) or connections (connections) acking at a time; default 4 and 16.") var workers: Int?
    @Option(help: "With --acks online: members connected from the start, each reading once per batch.") var online = 10_000
    @Option(help: "With --acks online: messages sent between two reads of every online member.") var batch = 5
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard members >= 3, messages >= 1, (workers ?? 1) >= 1, online >= 1, batch >= 1 else {
            throw ValidationError("Need --members >= 3, --messages >= 1, --workers >= 1, --online >= 1 and --batch >= 1.")
        }
    }
    func run() async throws {
        let (members, messages, acks, online, batch) = (self.members, self.messages, self.acks, self.online, self.batch)
        let workers = self.workers ?? (acks == .rest ? 4 : 16)
        try await options.measure {
            try await GroupScenario.run(
                $0, members: members, messages: messages, acks: acks, workers: workers, online: online, batch: batch
            )
        }
    }
}

struct Recall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "N messages recalled two-way, one request at a time per sender, while the recipients are online."
    )
    @Option var messages = 10_000
    @Option(help: "Sender/recipient pairs recalling in parallel.") var pairs = 10
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard pairs >= 1, messages >= pairs else {
            throw ValidationError("Need --pairs >= 1 and --messages >= --pairs.")
        }
    }
    func run() async throws {
        let (messages, pairs) = (self.messages, self.pairs)
        try await options.measure { try await RecallScenario.run($0, messages: messages, pairs: pairs) }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "courier-server import of a generated history of N messages in C conversations (SQLite): messages per second."
    )
    @Option var messages = 1_000_000
    @Option var conversations = 10_000
    @Option(help: "The courier-server binary to run (default: next to courier-bench).") var serverBinary: String?
    @Option(help: "The import's --durability: full (the default) or normal.") var durability = "full"
    @Option(help: "Stop after this many seconds.") var maxSeconds: Double = 600
    @Flag(help: "Print one JSON object instead of a table.") var json = false
    func validate() throws {
        guard conversations >= 1, messages >= conversations else {
            throw ValidationError("Need --conversations >= 1 and --messages >= --conversations.")
        }
        guard ["full", "normal"].contains(durability) else { throw ValidationError("--durability is full or normal.") }
    }
    func run() async throws {
        let binary = serverBinary ?? (CommandLine.arguments[0] as NSString).deletingLastPathComponent + "/courier-server"
        let report = try ImportScenario.run(
            messages: messages,
            conversations: conversations,
            binary: binary,
            durability: durability,
            maxSeconds: maxSeconds
        )
        FileHandle.standardOutput.write(Data(((json ? report.json : report.table) + "\n").utf8))
    }
}

struct Connections: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "C idle authenticated WebSocket connections.")
    @Option var count = 10_000
    @Flag(help: "Each device syncs once after connecting (as the SDK does), then idles.") var sync = false
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard count >= 1 else { throw ValidationError("Need --count >= 1.") }
    }
    func run() async throws {
        let (count, sync) = (self.count, self.sync)
        try await options.measure { try await ConnectionsScenario.run($0, count: count, sync: sync) }
    }
}

struct Typing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "D devices in groups of G each say they are typing R times (start and stop in turn), all at once."
    )
    @Option var devices = 1000
    @Option(help: "Members per group (the last group may be smaller).") var groupSize = 10
    @Option(help: "Indicators per device.") var rounds = 20
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard devices >= 2, groupSize >= 2, rounds >= 1 else {
            throw ValidationError("Need --devices >= 2, --group-size >= 2 and --rounds >= 1.")
        }
    }
    func run() async throws {
        let (devices, groupSize, rounds) = (self.devices, self.groupSize, self.rounds)
        try await options.measure { try await TypingScenario.run($0, devices: devices, groupSize: groupSize, rounds: rounds) }
    }
}

struct Reactions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A reaction burst on one message of a group of M: R members react at once while the owner asks for the counts."
    )
    @Option(help: "Members of the group, the owner included.") var members = 10_000
    @Option(help: "Members who react (each a 👍, every tenth a 🎉 too), through the app's backend.") var reactors = 5_000
    @Option(help: "REST requests at a time.") var workers = 16
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard members >= 2, (1..<members).contains(reactors), workers >= 1 else {
            throw ValidationError("Need --members >= 2, 1 <= --reactors < --members and --workers >= 1.")
        }
    }
    func run() async throws {
        let (members, reactors, workers) = (self.members, self.reactors, self.workers)
        try await options.measure {
            try await ReactionScenario.run($0, members: members, reactors: reactors, workers: workers)
        }
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A device reconnects after missing N messages.")
    @Option var messages = 100_000
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard messages >= 1 else { throw ValidationError("Need --messages >= 1.") }
    }
    func run() async throws {
        let messages = self.messages
        try await options.measure { try await SyncScenario.run($0, messages: messages) }
    }
}

struct Reconnect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An account in N conversations reconnects after K of them changed: what the sync costs."
    )
    @Option(help: "Direct conversations of the account.") var conversations = 5_000
    @Option(help: "Conversations that get a message while the device is away, each round.") var changed = 2
    @Option(help: "Reconnects measured.") var rounds = 20
    @Option(
        help: "How the device syncs: since (its account cursor, as the SDK does) or cursors (every conversation's, as before ADR 0017)."
    )
    var sync = "since"
    @OptionGroup var options: BenchOptions
    func validate() throws {
        guard conversations >= 1, changed >= 0, changed <= conversations, rounds >= 1 else {
            throw ValidationError("Need --conversations >= 1, 0 <= --changed <= --conversations and --rounds >= 1.")
        }
        guard ["since", "cursors"].contains(sync) else { throw ValidationError("--sync is since or cursors.") }
    }
    func run() async throws {
        let (conversations, changed, rounds, since) = (self.conversations, self.changed, self.rounds, sync == "since")
        try await options.measure {
            try await ReconnectScenario.run(
                $0,
                conversations: conversations,
                changed: changed,
                rounds: rounds,
                since: since
            )
        }
    }
}
