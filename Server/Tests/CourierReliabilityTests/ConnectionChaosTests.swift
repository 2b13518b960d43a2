// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// SPEC §2, §9.4, §9.5 and §9.7 between real SDK clients and a real server through a network that delays every chunk,
/// cuts connections and swallows traffic for a while: the SDK converges — every message stored once on each side, every
/// read acknowledged reaches the sender, no read watermark the sender sees goes back, unread counts end at zero.
@Suite("SDK clients through a faulty network", .timeLimit(.minutes(5)))
struct ConnectionChaosTests {
    static let directMessages = 60
    static let groupMessages = 30

    @Test("through delays, cuts and black holes, senders and readers converge; no receipt is lost or goes back")
    func converges() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            proxy.delay(upTo: 20)
            let url = URL(string: "ws://127.0.0.1:\(proxy.port)/v1/ws")!
            func client(_ account: AccountID) async throws -> CourierClient {
                let client = try server.client(device: "chaos") {
                    $0.serverURL = url
                    $0.requestTimeout = .seconds(2)
                }
                try await client.connect(account: account, token: try await server.token(for: account))
                return client
            }
            let alice = try await client("alice")
            let bob = try await client("bob")
            let carol = try await client("carol")
            let direct = ConversationID.direct("alice", "bob")
            let team = ConversationID.group("team")
            _ = try await carol.createGroup("team", members: ["alice", "bob"])
            let reads = Shared<[ReadUpdate]>([])
            let wakeups = [alice.events(), bob.events(), carol.events()]
            // Every stream is subscribed before the first send: a reader subscribed inside its task could start after
            // the first messages arrived (its task waits for a thread) and never read them.
            let aliceEvents = alice.events()
            let (bobArrivals, aliceArrivals) = (bob.events(), alice.events())
            let bobMarked = Shared<[MessageID: String]>([:])
            let sendFailures = Shared<[String]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Self.recordReads(aliceEvents, of: "bob", in: direct, into: reads) }
                group.addTask { try await Self.readEverything(bobArrivals, as: bob, marked: bobMarked) }
                group.addTask { try await Self.readEverything(aliceArrivals, as: alice, marked: Shared([:])) }
                group.addTask {
                    for index in 0..<Self.directMessages {
                        await Self.send("a\(index)", to: direct, from: alice, failures: sendFailures)
                    }
                }
                group.addTask {
                    for index in 0..<Self.groupMessages {
                        await Self.send("c\(index)", to: team, from: carol, needsReadReceipt: true, failures: sendFailures)
                    }
                }
                // The fault schedule: 16 faults, 0.2–0.6 s apart, then a healthy network. A count, not a duration: on a
                // loaded machine sleeps run long, and 8 s held only 7 faults. Convergence is judged after it.
                for _ in 0..<16 {
                    try await Task.sleep(for: .milliseconds(Int.random(in: 200...600)))
                    await proxy.inject(ChaosProxy.Fault.allCases.randomElement()!)
                }
                proxy.heal()
                let converged = try await Self.waitUntil(timeout: .seconds(90), woken: wakeups) {
                    try await Self.hasConverged(alice: alice, bob: bob, carol: carol, direct: direct, team: team)
                }
                group.cancelAll()
                #expect(converged, "the clients converged within 90 s of the faults ending")
                if !converged {
                    // What did not converge, for the failure's record.
                    let sent = try await alice.messages(in: direct, limit: 500).filter { $0.sender == "alice" }
                    let received = try await bob.messages(in: direct, limit: 500)
                    let pending = try await alice.pendingMessages()
                    print(
                        "chaos test: alice \(sent.map(\.status.rawValue)), \(pending.count) pending, "
                            + "\(alice.connectionState); bob holds \(received.count), \(bob.connectionState); "
                            + "carol \(carol.connectionState); proxy open connections \(proxy.openConnections)"
                    )
                    // The sends that threw (queued or not), and how.
                    let failures = sendFailures.withLock { $0 }
                    print("chaos test: \(failures.count) sends threw; the first: \(failures.prefix(5))")
                    // bob's messages still unread here: whether their arrival was seen, and how marking them ended.
                    let marked = bobMarked.withLock { $0 }
                    for message in received where message.sender == "alice" && !message.isReadAcked {
                        print("chaos test: bob has \(message.id) (seq \(message.seq)) unread; marked: \(marked[message.id] ?? "never seen")")
                    }
                    for (name, port) in [("server", server.port), ("proxy", proxy.port)] {
                        let socket = try RawSocket(port: port)
                        let upgraded = await socket.upgrade()
                        print("chaos test: a raw upgrade to the \(name) \(upgraded ? "works" : "fails")")
                    }
                }
            }
            let seen = reads.withLock { $0 }
            let watermarks = seen.map(\.watermark.seq)
            #expect(watermarks == watermarks.sorted(), "bob's read watermark as alice saw it went back: \(watermarks)")
            let sent = try await alice.messages(in: direct, limit: 500).filter { $0.sender == "alice" }
            #expect(Set(seen.flatMap(\.messageIDs)) == Set(sent.map(\.id)), "every read reached alice as an event")
            #expect(try await bob.unreadCount(in: direct) == 0)
            print("chaos test: \(proxy.faults) faults injected; alice saw \(seen.count) read updates from bob")
            await proxy.shutdown()
        }
    }

    /// Sends, keeping a message that timed out in the outbox: it goes out with the same client id on a later
    /// connection.
    static func send(
        _ body: String,
        to conversation: ConversationID,
        from client: CourierClient,
        needsReadReceipt: Bool = false,
        failures: Shared<[String]>
    ) async {
        do {
            try await client.send(body, to: conversation, needsReadReceipt: needsReadReceipt, clientID: ClientMessageID(rawValue: body)).stored()
        } catch {
            // Timed out through the faults: still queued. Kept for the record of a run that does not converge.
            failures.withLock { $0.append("\(body): \(error)") }
        }
    }

    /// Marks every message of others read as it arrives, one by one (each a message read ack).
    static func readEverything(
        _ events: AsyncStream<CourierEvent>,
        as client: CourierClient,
        marked: Shared<[MessageID: String]>
    ) async throws {
        for await event in events {
            guard let message = event.receivedMessage, message.sender != client.account, message.kind == .message
            else { continue }
            do {
                try await client.markRead(message.id, in: message.conversation)
                marked.withLock { $0[message.id] = "acked" }
            } catch {
                // Timed out through the faults: applied locally, sent when the connection is back.
                marked.withLock { $0[message.id] = "threw \(error)" }
            }
        }
    }

    static func recordReads(
        _ events: AsyncStream<CourierEvent>,
        of reader: AccountID,
        in conversation: ConversationID,
        into reads: Shared<[ReadUpdate]>
    ) async throws {
        for await event in events {
            guard let update = event.readUpdate, update.account == reader, update.conversation == conversation
            else { continue }
            reads.withLock { $0.append(update) }
        }
    }

    static func hasConverged(
        alice: CourierClient,
        bob: CourierClient,
        carol: CourierClient,
        direct: ConversationID,
        team: ConversationID
    ) async throws -> Bool {
        let sent = try await alice.messages(in: direct, limit: 500).filter { $0.sender == "alice" }
        guard sent.count == directMessages, sent.allSatisfy({ $0.status == .read }) else { return false }
        let received = try await bob.messages(in: direct, limit: 500).filter { $0.sender == "alice" }
        guard Set(received.map(\.id)).count == directMessages, received.count == directMessages else { return false }
        guard received.map(\.seq) == received.map(\.seq).sorted() else { return false }
        let asked = try await carol.messages(in: team, limit: 500).filter { $0.sender == "carol" && $0.needsReadReceipt }
        guard asked.count == groupMessages else { return false }
        let counts = try await carol.localReadReceiptCounts(for: asked.map(\.id))
        return counts.count == groupMessages && counts.allSatisfy { $0.readCount == 2 && $0.unreadCount == 0 }
    }

    /// Re-checks `condition` whenever one of `woken` yields, until it holds or `timeout` passes.
    static func waitUntil(
        timeout: Duration,
        woken streams: [AsyncStream<CourierEvent>],
        _ condition: @escaping @Sendable () async throws -> Bool
    ) async throws -> Bool {
        let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        return try await withThrowingTaskGroup(of: Bool?.self) { group in
            for stream in streams {
                group.addTask {
                    for await _ in stream { wake.yield() }
                    return nil
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            group.addTask {
                if try await condition() { return true }
                for await _ in wakeups where try await condition() { return true }
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            return false
        }
    }
}
