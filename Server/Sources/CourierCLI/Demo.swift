// Courier — Apache-2.0
import ArgumentParser
import CourierBackends
import CourierSDK
import CourierWire
import CourierServer
import Foundation
import Logging
import Synchronization

/// `courier demo`: an in-process server on a free loopback port and a narrated scenario with real SDK clients —
/// alice, bob on two devices (phone and laptop), carol and dave. Every step checks what the SDK reports against what
/// SPEC says; the command exits 0 when all did, 1 naming the step that did not.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a server on a free loopback port and play receipts and recalls, checking every step.",
        discussion: """
            Needs no running server: it starts one in this process (SQLite in a temporary folder, removed afterwards) \
            and drives it with SDK clients. Exit code 0: every step behaved as specified; 1: a step did not (named \
            on standard error).
            """
    )

    @Flag(help: "Print one JSON object per step instead of the narration.") var json = false
    @Option(help: "Seconds to wait for any one event before the step fails.") var timeout: Int = 10

    func run() async throws {
        let narrator = Narrator(json: json)
        let demo = try await DemoWorld.start(timeout: .seconds(timeout))
        let failure: DemoFailure?
        do {
            try await demo.play(narrator)
            failure = nil
        } catch let error as DemoFailure {
            failure = error
        } catch {
            failure = DemoFailure("unexpected error: \(error)")
        }
        await demo.stop()
        if let failure {
            narrator.fail(failure)
            throw ExitCode(1)
        }
        narrator.finish()
    }
}

/// A step that did not behave as specified.
struct DemoFailure: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// Prints the scenario as it runs: a title per step and what was checked, or one JSON object per step.
final class Narrator: Sendable {
    private let json: Bool
    private let state = Mutex<(step: Int, title: String, lines: [String])>((0, "start", []))

    init(json: Bool) { self.json = json }

    func begin(_ title: String) {
        flushStep()
        let number = state.withLock { state -> Int in
            state.step += 1
            state.title = title
            state.lines = []
            return state.step
        }
        if !json { say("\n\(number). \(title)") }
    }

    /// A line of narration under the current step.
    func note(_ line: String) {
        state.withLock { $0.lines.append(line) }
        if !json { say("   \(line)") }
    }

    private func flushStep() {
        guard json else { return }
        let (step, title, lines) = state.withLock { ($0.step, $0.title, $0.lines) }
        guard step > 0 else { return }
        emitJSON(["step": step, "title": title, "ok": true, "lines": lines])
    }

    func finish() {
        flushStep()
        let steps = state.withLock { $0.step }
        if json {
            emitJSON(["ok": true, "steps": steps])
        } else {
            say("\nAll \(steps) steps behaved as specified.")
        }
    }

    func fail(_ failure: DemoFailure) {
        let (step, title) = state.withLock { ($0.step, $0.title) }
        if json { emitJSON(["step": step, "title": title, "ok": false, "reason": failure.reason]) }
        FileHandle.standardError.write(Data("✗ Step \(step) (\(title)) failed: \(failure.reason)\n".utf8))
    }

    private func emitJSON(_ object: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        say(String(decoding: data, as: UTF8.self))
    }

    private func say(_ text: String) {
        print(text)
        fflush(nil)
    }
}

/// The demo's server and devices.
final class DemoWorld: Sendable {
    let node: EmbeddedNode
    let folder: URL
    let tokens: TokenAuthority
    let timeout: Duration
    /// The server's clock, which the demo moves forward to show the recall window's edge.
    let clock: DemoClock
    let alice: CourierClient
    let bobPhone: CourierClient
    let bobLaptop: CourierClient
    let carol: CourierClient
    let dave: CourierClient

    private init(
        node: EmbeddedNode,
        folder: URL,
        tokens: TokenAuthority,
        timeout: Duration,
        clock: DemoClock,
        clients: [CourierClient]
    ) {
        self.node = node
        self.folder = folder
        self.tokens = tokens
        self.timeout = timeout
        self.clock = clock
        (alice, bobPhone, bobLaptop, carol, dave) = (clients[0], clients[1], clients[2], clients[3], clients[4])
    }

    static func start(timeout: Duration) async throws -> DemoWorld {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("courier-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let secret = AppSecret.random()
        let clock = DemoClock()
        let configuration = CourierServerConfiguration(
            http: .init(host: "127.0.0.1", port: 0),
            appSecret: secret,
            now: { clock.now() }
        )
        var logger = Logger(label: "courier.demo")
        logger.logLevel = .critical
        let backend = try Backend.sqlite(.file(folder.appendingPathComponent("server/courier.sqlite").path))
        let node = try await EmbeddedNode.start(backend: backend, configuration: configuration, logger: logger)
        let url = URL(string: "ws://127.0.0.1:\(node.port)/v1/ws")!
        let clients = try [
            ("alice", "phone"), ("bob", "phone"), ("bob", "laptop"), ("carol", "phone"), ("dave", "phone"),
        ]
        .map { account, device in
            try CourierClient(
                configuration: .init(
                    serverURL: url,
                    store: .file(folder.appendingPathComponent("clients/\(account)-\(device)/store.sqlite")),
                    requestTimeout: timeout,
                    deviceID: DeviceID(rawValue: device)
                )
            )
        }
        return DemoWorld(
            node: node,
            folder: folder,
            tokens: await TokenAuthority(secret: secret),
            timeout: timeout,
            clock: clock,
            clients: clients
        )
    }

    func stop() async {
        for client in [alice, bobPhone, bobLaptop, carol, dave] { await client.disconnect() }
        await node.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    func connect(_ client: CourierClient, as account: AccountID) async throws {
        try await client.connect(
            account: account,
            token: try await tokens.token(for: account, lifetime: .seconds(3600))
        )
    }
}

/// The server's clock in the demo: real time plus an offset the demo moves forward.
final class DemoClock: Sendable {
    private let offset = Atomic<Int64>(0)

    func now() -> Timestamp { Timestamp(milliseconds: Timestamp.now().rawValue + offset.load(ordering: .relaxed)) }

    func advance(by duration: Duration) {
        offset.add(duration.components.seconds * 1000, ordering: .relaxed)
    }
}
