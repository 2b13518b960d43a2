// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// SPEC §9.9 measured on a server process: what devices that never read, and sockets that never speak, cost it.
@Suite("Resource bounds of a server process", .serialized, .timeLimit(.minutes(5)))
struct ResourceBoundTests {
    // Serialized: each test reads a server process's memory; two at once would share the machine's pages.

    /// The documented bound per device (`outboundQueueBytes`, 8 MiB) plus room for socket buffers, one frame in
    /// flight and the allocator's slack.
    static let perDeviceBoundMiB = 8 + 8
    /// The database's reader connections (up to 5) each keep a page cache of about 2 MiB once they have read. The
    /// pages test warms them before its baseline, but on a loaded machine the warming reads may not overlap, and then
    /// some readers first read during the measured run — the likely cause of the 17–22 MiB seen in CI and full-suite
    /// runs (0–5 MiB alone; 14–20 MiB measured earlier with no warming at all). They are the database's, bounded
    /// whatever the devices do, and counted apart from the device's bound.
    static let readerCachesMiB = 5 * 2

    /// The server, with glibc's mmap threshold pinned at its default (128 KiB): a multi-MiB page the server built,
    /// refused and freed then goes back to the system at once. Left dynamic, the threshold rises after the first such
    /// free and each allocator arena keeps the next ones, so RSS would measure glibc's caching (seen: +20 MiB on a
    /// loaded machine, +0 on an idle one) rather than what the server holds.
    static let launch = ServerProcess.Launch(
        binary: Binaries.courierServer,
        environment: ["MALLOC_MMAP_THRESHOLD_": "131072"]
    )

    @Test("a device that requests pages without reading is cut off; the server stays within its bound; others go on")
    func slowReaderOfHistory() async throws {
        let server = try ServerProcess(Self.launch, secret: Binaries.secret)
        defer { server.stop() }
        try await server.register(["alice", "bob", "carol", "dave"])
        let conversation = ConversationID.direct("alice", "bob")
        try await Self.fill(conversation, as: "bob", messages: 150, bodyBytes: 60_000, server: server)
        // Pages read by devices that do read warm the database's reader connections (SQLite's page cache, about 2 MiB
        // each, up to 5 readers) before the baseline: what follows measures what one device that never reads costs.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await server.withClient("bob", device: "warm") { client in
                        let reply = try await client.request {
                            .history($0, HistoryRequest(conversation: conversation, before: nil, limit: 500))
                        }
                        guard case .ack(_, .history) = reply else { throw HarnessError.refused("\(reply)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let before = server.rssKiB
        let hog = try await Self.rawDevice("alice", server: server)
        // 300 pages of about 4 MiB each: 1.2 GB if the server queued them all.
        for index in 0..<300 {
            let request = ClientFrame.history(RequestID(rawValue: "h\(index)"), HistoryRequest(conversation: conversation, before: nil, limit: 500))
            guard await hog.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(request).utf8))) else { break }
        }
        // Meanwhile another device sends and receives as usual.
        try await server.withClient("carol") { client in
            let reply = try await client.request {
                .send($0, SendRequest(conversation: .direct("carol", "dave"), clientID: "c-1", body: "still here"))
            }
            guard case .ack(_, .send) = reply else { throw HarnessError.refused("\(reply)") }
        }
        let peak = server.rssKiB
        let (_, closed) = await hog.receive(timeout: .seconds(10))
        #expect(closed, "the slow device was cut off")
        let grewMiB = (peak - before) / 1024
        print("slow reader: server grew by \(grewMiB) MiB (bound \(Self.perDeviceBoundMiB) MiB + readers' caches)")
        #expect(grewMiB <= Self.perDeviceBoundMiB + Self.readerCachesMiB)
    }

    @Test("three devices that never read 60 KiB messages are each cut off within their bound")
    func slowReadersOfMessages() async throws {
        let server = try ServerProcess(Self.launch, secret: Binaries.secret)
        defer { server.stop() }
        try await server.register(["alice", "bob"])
        let before = server.rssKiB
        var hogs: [RawSocket] = []
        for device in 0..<3 { hogs.append(try await Self.rawDevice("bob", device: DeviceID(rawValue: "hog\(device)"), server: server)) }
        // 24 MB for each device: more than its bound plus what the kernel's socket buffers hold.
        try await Self.fill(.direct("alice", "bob"), as: "alice", messages: 400, bodyBytes: 60_000, server: server)
        let peak = server.rssKiB
        for hog in hogs {
            let (_, closed) = await hog.receive(timeout: .seconds(10))
            #expect(closed, "a slow device was cut off")
        }
        let grewMiB = (peak - before) / 1024
        print("slow readers of messages: server grew by \(grewMiB) MiB for 3 devices")
        #expect(grewMiB <= 3 * Self.perDeviceBoundMiB)
    }

    @Test("idle sockets past the open-files limit do not lock real clients out")
    func descriptorStarvation() async throws {
        let prlimit = try #require(Binaries.which("prlimit"), "prlimit is needed (util-linux)")
        let server = try ServerProcess(
            .init(
                binary: Binaries.courierServer,
                arguments: ["--request-head-timeout-seconds", "2"],
                wrapper: [prlimit, "--nofile=256:256"]
            ),
            secret: Binaries.secret
        )
        defer { server.stop() }
        try await server.register(["alice", "bob"])
        let idle = try (0..<300).map { _ in try RawSocket(port: server.port) }
        let start = ContinuousClock.now
        try await server.withClient("alice") { client in
            let reply = try await client.request {
                .send($0, SendRequest(conversation: .direct("alice", "bob"), clientID: "a-1", body: "through"))
            }
            guard case .ack(_, .send) = reply else { throw HarnessError.refused("\(reply)") }
        }
        let waited = ContinuousClock.now - start
        print("descriptor starvation: a real client got through after \(waited) behind \(idle.count) idle sockets")
        #expect(waited < .seconds(15))
        #expect(server.openDescriptors < 256)
        #expect(server.isAlive)
        var closedCount = 0
        for socket in idle where await socket.receive(timeout: .seconds(10)).closed { closedCount += 1 }
        #expect(closedCount == idle.count, "every idle socket is closed in the end")
    }

    /// Messages per conversation in ``webhookBacklog()``: 16 KiB each, six conversations.
    static let backlogMessages = 330

    /// Sends `messages` messages of `bodyBytes` into `conversation` as `account`.
    @Test("a webhook receiver that is down: the backlog grows on disk, not in memory, and drains in order once it is back")
    func webhookBacklog() async throws {
        var launch = Self.launch
        // The receiver listens on 127.0.0.1.
        launch.arguments = ["--webhook-first-retry-ms", "100", "--webhook-allow-private", "true"]
        let server = try ServerProcess(launch, secret: Binaries.secret)
        defer { server.stop() }
        let peers = (0..<6).map { AccountID(rawValue: "peer\($0)") }
        try await server.register(["alice"] + peers)
        let port = try await freePort()  // nobody listens there until the end
        let path = WebhookReceiver.uniquePath()
        let body = #"{"url":"http://127.0.0.1:\#(port)\#(path)","events":["message.created"]}"#
        let (status, created) = try await server.rest("POST", "/v1/webhooks", json: Data(body.utf8))
        #expect(status == 201)
        struct Created: Decodable { let id: String; let secret: String }
        let endpoint = try JSONDecoder().decode(Created.self, from: created)

        // Six conversations, 16 KiB messages: a first round warms the caches, then the baseline, then five times
        // as many while the receiver is still away (about 32 MB of event payloads waiting). The bounds leave room for
        // what is bounded whatever the backlog: the page caches of the database's connections (about 2 MiB each),
        // which now hold pages of the event log the endpoint's stream reads.
        let text = String(repeating: "w", count: 16 << 10)
        func send(_ range: Range<Int>) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for peer in peers {
                    group.addTask {
                        try await server.withClient("alice", device: DeviceID(rawValue: "to-\(peer)")) { client in
                            for index in range {
                                let reply = try await client.request {
                                    .send($0, SendRequest(conversation: .direct("alice", peer), clientID: ClientMessageID(rawValue: "\(peer)-\(index)"), body: text))
                                }
                                guard case .ack(_, .send) = reply else { throw HarnessError.refused("\(reply)") }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await send(0..<30)
        let before = server.rssKiB
        try await send(30..<Self.backlogMessages)
        let after = server.rssKiB
        let pendingPath = "/v1/webhooks/\(endpoint.id)/deliveries?state=pending&limit=100"
        struct Page: Decodable { let deliveries: [Delivery]; let nextCursor: String? }
        struct Delivery: Decodable { let seq: Int64 }
        var pending = 0
        var cursor: String?
        repeat {
            let (_, data) = try await server.rest("GET", pendingPath + (cursor.map { "&cursor=\($0)" } ?? ""))
            let page = try JSONDecoder().decode(Page.self, from: data)
            pending += page.deliveries.count
            cursor = page.nextCursor
        } while cursor != nil
        let grewMiB = Double(after - before) / 1024
        print("webhook backlog: \(pending) deliveries pending, server grew by \(String(format: "%.1f", grewMiB)) MiB")
        #expect(pending == 6 * Self.backlogMessages, "every event waits on disk")
        // The backlog gauge says the same at once (it used to read 0 until the dispatcher's next count).
        let (_, metrics) = try await server.rest("GET", "/metrics")
        #expect(String(decoding: metrics, as: UTF8.self).contains("\ncourier_webhook_backlog \(pending).0\n"))
        #expect(grewMiB <= 12, "the backlog (about 32 MB) is not held in memory")

        // The receiver is back: everything arrives, each conversation in order (the first retry that succeeds makes
        // the endpoint's other backed-off deliveries due at once).
        let receiver = try await WebhookReceiver(port: port, path: path, secrets: [endpoint.secret])
        defer { receiver.stop() }
        // Bounded: a receiver stopped after 90 s ends the loop (and the diagnosis below says what waits).
        let watchdog = Task {
            try await Task.sleep(for: .seconds(90))
            receiver.stop()
        }
        defer { watchdog.cancel() }
        var seqs: [String: [Int64]] = [:]
        var seen: Set<String> = []
        // The server's memory while it drains, read every 30 deliveries: the backlog is read from disk a run at a
        // time, never loaded whole. Six runs at once (one per conversation) of up to 31 events of 16 KiB, with the
        // requests' copies, took 17.0-22.6 MiB above the baseline in four runs alone (2026-11-29, before and after ADR
        // 0033), up to 33.1 MiB in a full parallel run (a slower receiver, more requests in flight); the backlog held
        // whole would add its 32 MB to that.
        var drainingKiB = server.rssKiB
        while seen.count < 6 * Self.backlogMessages, let delivery = await receiver.next() {
            #expect(delivery.verified)
            guard let id = delivery.id, seen.insert(id).inserted, let message = delivery.payload?.data.message else { continue }
            seqs[message.conversation.rawValue, default: []].append(message.seq.rawValue)
            if seen.count % 30 == 0 { drainingKiB = max(drainingKiB, server.rssKiB) }
        }
        let drainGrewMiB = Double(drainingKiB - before) / 1024
        print("webhook backlog: while draining the server was at most \(String(format: "%.1f", drainGrewMiB)) MiB above the baseline")
        #expect(drainGrewMiB <= 40, "draining the backlog (about 32 MB) does not hold it in memory")
        if seen.count < 6 * Self.backlogMessages {
            let (_, data) = try await server.rest("GET", pendingPath)
            print("still pending: \(String(decoding: data, as: UTF8.self).prefix(3000))")
        }
        #expect(seen.count == 6 * Self.backlogMessages)
        #expect(seqs.count == 6 && seqs.values.allSatisfy { $0 == Array(1...Int64(Self.backlogMessages)) })
    }

    static func fill(
        _ conversation: ConversationID,
        as account: AccountID,
        messages: Int,
        bodyBytes: Int,
        server: ServerProcess
    ) async throws {
        let body = String(repeating: "m", count: bodyBytes)
        try await server.withClient(account, device: "filler") { client in
            for index in 0..<messages {
                let reply = try await client.request {
                    .send($0, SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "fill-\(index)"), body: body))
                }
                guard case .ack(_, .send) = reply else { throw HarnessError.refused("\(reply)") }
            }
        }
    }

    /// A device on a bare socket, connected as `account`, that will never read again.
    static func rawDevice(_ account: AccountID, device: DeviceID = "hog", server: ServerProcess) async throws -> RawSocket {
        let socket = try RawSocket(port: server.port)
        guard await socket.upgrade() else { throw HarnessError.refused("upgrade") }
        let connect = ClientFrame.connect("c", ConnectRequest(token: try await Binaries.token(for: account), account: account, device: device))
        await socket.send(RawSocket.frame(opcode: 0x1, payload: Array(try FrameCoder().encode(connect).utf8)))
        let (text, _) = await socket.receive(until: #""request":"connect""#, timeout: .seconds(10))
        guard text.contains(#""type":"ack""#) else { throw HarnessError.refused("connect: \(text)") }
        return socket
    }
}
