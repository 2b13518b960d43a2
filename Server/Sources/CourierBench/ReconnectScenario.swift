// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Synchronization

/// `reconnect --conversations N --changed K`: an account in N direct conversations syncs once; then, `--rounds` times,
/// its device goes away, K of the conversations get a message, and it reconnects and syncs — with the cursor its last
/// sync ended with, as the SDK does (ADR 0017), or with `--sync cursors` with every conversation's cursor, as before.
/// What a reconnect costs against what changed: the sync's requests and acks in bytes (as encoded on the wire), its
/// time, the conversation states it received, and the server's CPU.
enum ReconnectScenario {
    static let me: AccountID = "rc-me"

    /// What the device holds: every conversation's cursor, and the `since` its last sync ended with.
    struct Held: Sendable {
        var cursors: [ConversationID: Seq] = [:]
        var since: String?
        /// Whether the device syncs with `since` (the SDK's way) or with its cursors.
        let usesSince: Bool
    }

    static func run(
        _ context: BenchContext,
        conversations: Int,
        changed: Int,
        rounds: Int,
        since usesSince: Bool
    ) async throws -> Report {
        let peers = (0..<conversations).map { AccountID(rawValue: "rc-p\($0)") }
        try await register([me] + peers, on: context.server)
        // Every conversation gets its first message (the app's REST send, 16 at a time).
        try await send(from: Array(peers), label: "first", on: context)
        var held = Held(usesSince: usesSince)
        _ = try await reconnectAndSync(context, held: &held)
        var milliseconds = Samples()
        var requestBytes = Samples()
        var ackBytes = Samples()
        var states = Samples()
        var pages = Samples()
        var cpu = 0.0
        for round in 0..<rounds {
            // While the device is away, K conversations (a different K each round) get a message.
            let start = (round * changed) % conversations
            let senders = (0..<changed).map { peers[(start + $0) % conversations] }
            try await send(from: senders, label: "r\(round)", on: context)
            let cpuBefore = context.server.cpuSeconds
            let sync = try await reconnectAndSync(context, held: &held)
            cpu += context.server.cpuSeconds - cpuBefore
            milliseconds.add(sync.milliseconds)
            requestBytes.add(Double(sync.requestBytes))
            ackBytes.add(Double(sync.ackBytes))
            states.add(Double(sync.states))
            pages.add(Double(sync.pages))
            try context.checkDeadline("reconnecting")
        }
        var report = Report()
        report["scenario"] = .string("reconnect")
        report["sync"] = .string(usesSince ? "since" : "cursors")
        report["conversations"] = .integer(conversations)
        report["changed"] = .integer(changed)
        report["rounds"] = .integer(rounds)
        report["sync_ms"] = .latency(milliseconds)
        report["request_bytes_p50"] = .number(requestBytes.percentile(50))
        report["ack_bytes_p50"] = .number(ackBytes.percentile(50))
        report["states_received_p50"] = .number(states.percentile(50))
        report["pages_p50"] = .number(pages.percentile(50))
        // Includes the connect (a token check and one read): the sync is most of it.
        report["server_cpu_ms_per_reconnect"] = .number((cpu / Double(rounds) * 1000 * 10).rounded() / 10)
        return report
    }

    struct Sync {
        var milliseconds = 0.0
        var requestBytes = 0
        var ackBytes = 0
        var states = 0
        var pages = 0
    }

    /// Connects the device, pages `sync` from what it holds until it is caught up, and disconnects.
    static func reconnectAndSync(_ context: BenchContext, held: inout Held) async throws -> Sync {
        let before = held
        let result = try await withConnectedClients(context, accounts: [me]) { clients in
            let coder = FrameCoder()
            var held = before
            var sync = Sync()
            let start = nowMilliseconds()
            // Without a cursor (the first sync), the device names what it held when the sync began, as the SDK does;
            // the pages after the first continue from the ack's `since`. Without `--sync since`, every page names
            // every conversation held, as before ADR 0017.
            let named = held.since == nil ? held.cursors : [:]
            var since = held.since
            while true {
                let request =
                    held.usesSince
                    ? SyncRequest(cursors: named, since: since) : SyncRequest(cursors: held.cursors)
                sync.requestBytes += try coder.encode(ClientFrame.sync(RequestID(rawValue: "1"), request)).utf8.count
                let reply = try await answer(within: context) { try await clients[0].request { .sync($0, request) } }
                guard case .ack(_, .sync(let ack)) = reply else { throw HarnessError.refused("\(reply)") }
                sync.ackBytes += coder.encode(reply).utf8.count
                sync.states += ack.conversations.count
                sync.pages += 1
                for message in ack.messages {
                    held.cursors[message.conversation] = max(held.cursors[message.conversation] ?? .zero, message.seq)
                }
                since = ack.since
                if !ack.hasMore {
                    held.since = ack.since
                    break
                }
                try context.checkDeadline("syncing")
            }
            sync.milliseconds = nowMilliseconds() - start
            return (sync, held)
        }
        held = result.1
        return result.0
    }

    /// `request`'s answer, or a failure once the run's deadline has passed: a request the server refuses without
    /// naming it (a frame over `--max-frame-bytes`: the request of an account in about 12,000 conversations) gets no
    /// answer, and the run must still end.
    static func answer(
        within context: BenchContext,
        _ request: @escaping @Sendable () async throws -> ServerFrame
    ) async throws -> ServerFrame {
        // Raced in tasks of their own: a request that is never answered cannot be cancelled, and a child task would
        // be waited for.
        let answered = Mutex(false)
        return try await withCheckedThrowingContinuation { continuation in
            let finish = { @Sendable (result: Result<ServerFrame, any Error>) in
                guard answered.withLock({ done in defer { done = true }; return !done }) else { return }
                continuation.resume(with: result)
            }
            Task {
                do { finish(.success(try await request())) } catch { finish(.failure(error)) }
            }
            Task {
                try? await Task.sleep(for: .milliseconds(max(0, context.deadline - nowMilliseconds())))
                finish(.failure(HarnessError.timedOut("a sync answer (is the request over the server's --max-frame-bytes?)")))
            }
        }
    }

    static func register(_ accounts: [AccountID], on server: ServerProcess) async throws {
        for chunk in stride(from: 0, to: accounts.count, by: 1000).map({ accounts[$0..<min($0 + 1000, accounts.count)] }) {
            let body = try JSONEncoder().encode(["accounts": chunk.map(\.rawValue)])
            let (status, _) = try await server.rest("POST", "/v1/accounts", json: body)
            guard (200..<300).contains(status) else { throw HarnessError.refused("POST /v1/accounts answered \(status)") }
        }
    }

    /// One message from each of `senders` to the account, through the app's REST API, 16 at a time.
    static func send(from senders: [AccountID], label: String, on context: BenchContext) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, sender) in senders.enumerated() {
                if index >= 16 { try await group.next() }
                group.addTask {
                    let conversation = ConversationID.direct(sender, me)
                    let body = try JSONEncoder().encode(["from": sender.rawValue, "clientId": "\(label)-\(index)", "body": "\(label) from \(sender)"])
                    let (status, _) = try await context.server.rest("POST", "/v1/conversations/\(conversation)/messages", json: body)
                    guard (200..<300).contains(status) else { throw HarnessError.refused("REST send answered \(status)") }
                }
            }
            try await group.waitForAll()
        }
        try context.checkDeadline("sending")
    }
}
