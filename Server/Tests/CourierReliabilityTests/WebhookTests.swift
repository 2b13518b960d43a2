// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A webhook receiver that is not ours: `Tests/Tools/webhook_receiver.py` verifies every delivery with the Standard
/// Webhooks reference library (`standardwebhooks`, PyPI, installed by `.ci/run`) and reports each as a JSON line.
final class WebhookReceiver: Sendable {
    struct Received: Decodable, Sendable {
        let verified: Bool
        let id: String?
        let type: String?
        let status: Int
        let signatures: Int?
        let error: String?
        let payload: Payload?
        /// A batch's events (an endpoint with `batch`), in the order of the body.
        let batch: [Payload]?
        /// The indexes of the receiver's secrets that verify the delivery (arguments first, then the secrets file).
        let verifiedBy: [Int]?
        /// With a hold file: whether the delivery arrived while the receiver held its answers back (with a file for
        /// repeats, reported on repeats only).
        let held: Bool?
        enum CodingKeys: String, CodingKey {
            case verified, id, type, status, signatures, error, payload, held, batch
            case verifiedBy = "verified_by"
        }
    }
    struct Payload: Decodable, Sendable {
        /// A batch's event carries its id (a single event's is the `webhook-id` header).
        let id: String?
        let type: String
        let timestamp: String
        let data: EventData
    }
    struct EventData: Decodable, Sendable {
        let message: WireMessage?
        let conversation: String?
        let reader: String?
        let account: String?
        let profile: AccountProfile?
        let reaction: ReactionEvent?
        let receipts: [Receipt]?
        let recipients: [PushRecipient]?
        let nextCursor: String?
    }
    struct Receipt: Decodable, Sendable {
        let messageId: String
        let readCount: Int
        let unreadCount: Int
    }

    let process: ChildProcess
    let port: Int
    let path: String
    private let inbox: Inbox

    /// The deliveries as the receiver reports them, one at a time: one iterator for the receiver's life, read by the
    /// test's own task only.
    final class Inbox: @unchecked Sendable {
        var iterator: AsyncStream<Received>.Iterator
        init(_ stream: AsyncStream<Received>) { iterator = stream.makeAsyncIterator() }
        func next() async -> Received? { await iterator.next(isolation: nil) }
    }

    /// The next delivery the receiver got; `nil` once it stopped.
    func next() async -> Received? { await inbox.next() }

    /// Deliveries until `done` says enough (it sees each one), all of them returned.
    func collect(until done: ([Received]) -> Bool) async -> [Received] {
        var all: [Received] = []
        while !done(all), let delivery = await next() { all.append(delivery) }
        return all
    }

    /// Starts a receiver on `port` (0: a free one) that accepts deliveries signed with any of `secrets` (and of those
    /// in `secretsFile`, read again for each delivery) and answers `failStatus` (when given) instead of 204 to verified
    /// ones; with `holdFile`, it answers each delivery only once that file exists, and with `holdRepeatsFile` each
    /// delivery whose `webhook-id` came before (a retry). With `clockFile`, the receiver's clock is ahead by the
    /// milliseconds that file holds: it keeps the time of a server whose clock the test moves.
    init(
        port: Int = 0,
        path: String = "/hooks",
        secrets: [String],
        secretsFile: String? = nil,
        holdFile: String? = nil,
        holdRepeatsFile: String? = nil,
        failStatus: Int? = nil,
        failFirst: Int? = nil,
        clockFile: String? = nil
    ) async throws {
        let script = URL(filePath: #filePath).deletingLastPathComponent()
            .appending(path: "../Tools/webhook_receiver.py").standardizedFileURL.path
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONUNBUFFERED"] = "1"
        if let failStatus { environment["FAIL_STATUS"] = String(failStatus) }
        if let failFirst { environment["FAIL_FIRST"] = String(failFirst) }
        environment["RECEIVER_PATH"] = path
        if let secretsFile { environment["SECRETS_FILE"] = secretsFile }
        if let holdFile { environment["HOLD_FILE"] = holdFile }
        if let holdRepeatsFile { environment["HOLD_REPEATS_FILE"] = holdRepeatsFile }
        if let clockFile { environment["CLOCK_FILE"] = clockFile }
        self.path = path
        process = try ChildProcess(
            "/usr/bin/env",
            ["python3", script, String(port)] + secrets,
            environment: environment,
            captureOutput: true
        )
        var lines = process.lines().makeAsyncIterator()
        guard let first = await lines.next(), first.hasPrefix("listening "), let bound = Int(first.dropFirst(10)) else {
            process.signal(SIGKILL)
            throw ReceiverError(description: "The webhook receiver did not start (is standardwebhooks installed?).")
        }
        self.port = bound
        let (stream, continuation) = AsyncStream.makeStream(of: Received.self)
        inbox = Inbox(stream)
        let iterator = UncheckedBox(lines)
        Task {
            var lines = iterator.value
            while let line = await lines.next() {
                if let received = try? JSONDecoder().decode(Received.self, from: Data(line.utf8)) {
                    continuation.yield(received)
                }
            }
            continuation.finish()
        }
    }

    var url: String { "http://127.0.0.1:\(port)\(path)" }

    /// A path no other test's endpoint uses: ports are reused between tests, paths are not.
    static func uniquePath() -> String { "/hooks/" + UUID().uuidString.lowercased() }

    func stop() {
        process.signal(SIGKILL)
        process.wait()
    }
}

struct ReceiverError: Error, CustomStringConvertible {
    let description: String
}

/// Carries a non-Sendable iterator into the one task that uses it from then on.
struct UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// Webhooks: every event type, signed per Standard Webhooks and verified by its reference library; in order
/// per conversation; retried while the receiver is away, then drained in order; failed deliveries retried through the
/// API.
// 5 minutes: the two-node test takes 4 s alone but went past 120 s once in a full run on two cores.
@Suite("Webhooks", .timeLimit(.minutes(5)))
struct WebhookTests {
    struct Created: Decodable { let id: String; let secret: String }
    struct Rotated: Decodable { let secret: String }
    struct Delivery: Decodable { let seq: Int64; let eventId: String; let state: String; let attempts: Int; let type: String }
    struct Deliveries: Decodable { let deliveries: [Delivery]; let nextCursor: String? }
    struct Retried: Decodable { let retried: Int }

    static func endpoint(_ server: TestServer, url: String, events: [String]? = nil) async throws -> Created {
        let filter = events.map { #","events":[\#($0.map { "\"\($0)\"" }.joined(separator: ","))]"# } ?? ""
        let (status, body) = try await server.restResponse("POST", "/v1/webhooks", body: #"{"url":"\#(url)"\#(filter)}"#)
        #expect(status == 201)
        return try JSONDecoder().decode(Created.self, from: body)
    }

    static func deliveries(_ server: TestServer, _ endpoint: String, state: String? = nil) async throws -> [Delivery] {
        var all: [Delivery] = []
        var cursor: String?
        repeat {
            var path = "/v1/webhooks/\(endpoint)/deliveries?limit=100"
            if let state { path += "&state=\(state)" }
            if let cursor { path += "&cursor=\(cursor)" }
            let (status, body) = try await server.restResponse("GET", path)
            #expect(status == 200)
            let page = try JSONDecoder().decode(Deliveries.self, from: body)
            all += page.deliveries
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    /// Retries given up after 300 ms: a delivery that is refused is failed at once.
    @Sendable static func shortRetryPeriod(_ configuration: inout CourierServerConfiguration) {
        configuration.webhooks.retry = WebhookRetryPolicy(
            period: .milliseconds(300),
            initial: .milliseconds(50),
            maximum: .milliseconds(100)
        )
        configuration.webhooks.pollInterval = .milliseconds(50)
    }

    @Sendable static func fastRetries(_ configuration: inout CourierServerConfiguration) {
        configuration.webhooks.retry = WebhookRetryPolicy(
            period: .seconds(3600),
            initial: .milliseconds(50),
            maximum: .milliseconds(300)
        )
        configuration.webhooks.pollInterval = .milliseconds(50)
    }

    @Test("every event type arrives signed, verified by the Standard Webhooks library, in order per conversation", arguments: ServerBackend.available)
    func everyEventType(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            // The endpoint comes first: events are recorded for the endpoints that exist when they commit.
            let secretHolder = try await Self.endpoint(server, url: "http://127.0.0.1:1/placeholder", events: ["group.changed"])
            _ = secretHolder
            let receiverPort = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await Self.endpoint(server, url: "http://127.0.0.1:\(receiverPort)\(path)")
            // The receiver reads its secrets from a file, so that it can be handed the rotated one below.
            let secretsFile = FileManager.default.temporaryDirectory.appending(path: "secrets-\(UUID().uuidString)").path
            try (created.secret + "\n").write(toFile: secretsFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: secretsFile) }
            let receiver = try await WebhookReceiver(port: receiverPort, path: path, secrets: [], secretsFile: secretsFile)
            defer { receiver.stop() }

            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let direct = ConversationID.direct("alice", "bob")
            let bobEvents = bob.events()
            let first = try await alice.send("one", to: direct).stored()
            let second = try await alice.send("two", to: direct).stored()
            _ = try await bobEvents.collect(2) { $0.receivedMessage }
            try await bob.markRead(second.id, in: direct)
            let team = ConversationID.group("team")
            _ = try await alice.createGroup("team", members: ["bob", "carol"])
            let asked = try await alice.send("lunch?", to: team, needsReadReceipt: true).stored()
            let plain = try await alice.send("plain", to: team).stored()
            try await alice.requestReadReceipts(for: plain.id, in: team)
            try await bob.markRead(asked.id, in: team)
            _ = try await alice.edit(second.id, in: direct, body: "two, edited")
            try await bob.react("👍", to: second.id, in: direct)
            try await bob.removeReaction("👍", from: second.id, in: direct)
            _ = try await alice.recall(first.id, in: direct)
            try await alice.setProfile(displayName: "Alice")

            let wanted: Set = [
                "message.created", "message.delivered", "message.read", "message.recalled", "message.edited",
                "group.changed", "readReceipts.requested", "account.updated", "reaction.added", "reaction.removed",
            ]
            let all = await receiver.collect { all in
                let types = all.compactMap(\.type)
                return wanted.isSubset(of: types) && types.filter { $0 == "message.created" }.count >= 4
                    && types.filter { $0 == "message.read" }.count >= 2
            }
            let seen = Dictionary(grouping: all) { $0.type ?? "?" }
            let unverified = all.filter { !$0.verified }.map { $0.error ?? "" }
            #expect(unverified.isEmpty, "\(unverified)")
            #expect(all.allSatisfy { $0.signatures == 1 })
            // The log's entries of each conversation arrive in the order of its log.
            for conversation in [direct, team] {
                let seqs = all.compactMap { $0.payload?.data.message }.filter { $0.conversation == conversation }.map(\.seq)
                #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(conversation): \(seqs)")
            }
            let createdIDs = seen["message.created"]!.compactMap { $0.payload?.data.message?.id }
            #expect(Set(createdIDs).isSuperset(of: [first.id, second.id, asked.id, plain.id]))
            #expect(seen["message.recalled"]!.first?.payload?.data.message?.recall?.messageID == first.id)
            let edit = seen["message.edited"]!.first?.payload?.data.message
            #expect(edit?.edit?.messageID == second.id && edit?.body == "two, edited" && edit?.edit?.editedBy == "alice")
            let reacted = seen["reaction.added"]!.first?.payload?.data.reaction
            #expect(reacted?.account == "bob" && reacted?.reaction == "👍" && reacted?.counts.first?.count == 1)
            #expect(seen["reaction.removed"]!.first?.payload?.data.reaction?.counts.isEmpty == true)
            #expect(seen["readReceipts.requested"]!.first?.payload?.data.message?.receiptRequest == plain.id)
            #expect(seen["message.delivered"]!.contains { $0.payload?.data.account == "bob" })
            let updated = seen["account.updated"]!.first?.payload?.data.profile
            #expect(updated?.account == "alice" && updated?.displayName == "Alice" && (updated?.version ?? 0) > 0)
            let groupRead = seen["message.read"]!.first { $0.payload?.data.conversation == team.rawValue }
            #expect(groupRead?.payload?.data.reader == "bob")
            #expect(groupRead?.payload?.data.receipts?.first.map { [$0.readCount, $0.unreadCount] } == [1, 1])
            // The same event keeps its id, and every event was recorded for the endpoint that filters on
            // group.changed only as well.
            let filtered = try await Self.deliveries(server, secretHolder.id)
            #expect(Set(filtered.map(\.type)) == ["group.changed"])

            // Secret rotation: both secrets sign during the overlap, so a receiver still holding the old one verifies,
            // and one that switched to the new one does too: the library verifies the delivery with each of them.
            let (status, body) = try await server.restResponse("POST", "/v1/webhooks/\(created.id)/secret")
            #expect(status == 200)
            let rotated = try JSONDecoder().decode(Rotated.self, from: body)
            #expect(rotated.secret != created.secret && rotated.secret.hasPrefix("whsec_"))
            try (created.secret + "\n" + rotated.secret + "\n").write(toFile: secretsFile, atomically: true, encoding: .utf8)
            _ = try await alice.send("after rotation", to: direct).stored()
            let afterRotation = await receiver.collect { $0.last?.type == "message.created" }.last
            #expect(afterRotation?.verified == true && afterRotation?.signatures == 2)
            #expect(afterRotation?.verifiedBy == [0, 1], "verified by the old and the new secret")
        }
    }

    @Test("retention: past the retention after they were delivered, a node deletes deliveries; pending ones stay", arguments: ServerBackend.available)
    func retention(backend: ServerBackend) async throws {
        // The server's clock stands still until the test moves it: every outcome recorded before that is recorded
        // at the start, whenever the node gets to it. It moves by 4 minutes, past a retention of 3: deliveries are
        // signed with the server's clock, and the receiver's verifier accepts timestamps up to 5 minutes off.
        let clock = Atomic<Int64>(Timestamp.now().rawValue)
        try await withTestServer(on: backend, configure: { configuration in
            Self.fastRetries(&configuration)
            // Retried for 30 days: the endpoint that is away keeps its deliveries pending past the retention.
            configuration.webhooks.retry = WebhookRetryPolicy(
                period: .seconds(30 * 86_400),
                initial: .milliseconds(50),
                maximum: .milliseconds(300)
            )
            configuration.webhooks.retention = .seconds(180)
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
        }) { server in
            try await server.register("alice", "bob")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await Self.endpoint(server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret])
            defer { receiver.stop() }
            // A second endpoint that is never up: its delivery stays pending all along.
            let away = try await Self.endpoint(server, url: "http://127.0.0.1:1/away", events: ["message.created"])
            let alice = try await server.connectedClient("alice")
            let direct = ConversationID.direct("alice", "bob")
            func sendAndReceive(_ body: String) async throws -> Int64 {
                let message = try await alice.send(body, to: direct).stored()
                let received = try #require(await receiver.next())
                #expect(received.verified && received.payload?.data.message?.id == message.id, "\(received)")
                return message.seq.rawValue
            }
            // Events of one conversation go in order: once the third arrives, the first two were recorded, at the
            // start, as delivered.
            _ = try await sendAndReceive("one")
            _ = try await sendAndReceive("two")
            _ = try await sendAndReceive("three")
            let before = try await Self.deliveries(server, created.id).map(\.seq).sorted()
            #expect(before.count == 3)
            let firstTwo = Set(before.prefix(2))

            clock.add(240_000, ordering: .relaxed)
            // A stream's cycle started after the clock moved comes after a pruning pass: the dispatcher prunes before
            // it starts the cycles that are due, and the cycle that hands the fourth event over started after it.
            _ = try await sendAndReceive("four")
            _ = try await sendAndReceive("five")
            // The first two were delivered 4 minutes ago (by the server's clock): gone. The third may have
            // been recorded before or after the clock moved; the fourth and fifth are recent.
            let left = try await Self.deliveries(server, created.id)
            #expect(firstTwo.isDisjoint(with: left.map(\.seq)), "\(left.map { "\($0.seq):\($0.state)" })")
            #expect((2...3).contains(left.count), "\(left.map { "\($0.seq):\($0.state)" })")
            let kept = try await Self.deliveries(server, away.id)
            #expect(kept.count == 5 && kept.allSatisfy { $0.state == "pending" }, "a pending delivery is never pruned")
        }
    }

    struct Undelivered: Decodable { let recipients: [PushRecipient]; let nextCursor: String? }

    @Test(
        "push recipe: message.undelivered names the recipients with no device that has the message, and their tokens",
        arguments: ServerBackend.available
    )
    func pushRecipe(backend: ServerBackend) async throws {
        // The server's clock moves past the push delay only when the test says so: each look-up happens after what
        // the test made sure of (a delivery stored, a read acknowledged), however loaded the machine.
        let clock = Atomic<Int64>(Timestamp.now().rawValue)
        func pushDelayPasses() { clock.add(3000, ordering: .relaxed) }
        try await withTestServer(on: backend, configure: { configuration in
            Self.fastRetries(&configuration)
            configuration.webhooks.pushRecipientsPerEvent = 2
            configuration.now = { Timestamp(milliseconds: clock.load(ordering: .relaxed)) }
        }) { server in
            try await server.register("alice", "bob", "carol", "dave", "erin")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await Self.endpoint(
                server,
                url: "http://127.0.0.1:\(port)\(path)",
                events: ["message.undelivered"]
            )
            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret])
            defer { receiver.stop() }
            let alice = try await server.connectedClient("alice")
            let aliceEvents = alice.events()
            // Bob's phone registers its token, then goes away.
            let bobPhone = try await server.connectedClient("bob", device: "phone")
            try await bobPhone.registerPushToken(fcm: "fcm-token-of-bob")
            let direct = ConversationID.direct("alice", "bob")

            // While Bob is online his device has the message: nothing to push.
            let seen = try await alice.send("seen", to: direct).stored()
            _ = try await aliceEvents.first { $0.deliveryUpdate?.messageIDs.contains(seen.id) == true ? true : nil }
            pushDelayPasses()
            // Bob mutes the chat (ADR 0029): the push recipe is told so, and decides.
            try await bobPhone.setMuted(true, in: direct)
            await bobPhone.disconnect()
            let missed = try await alice.send("missed", to: direct, ext: ["orderId": "A-17"]).stored()
            pushDelayPasses()
            let first = try #require(await receiver.next())
            #expect(first.verified && first.type == "message.undelivered")
            #expect(first.payload?.data.message?.id == missed.id, "the first push of the conversation is the missed message")
            let bobToken = try #require(first.payload?.data.recipients?.first?.tokens.first)
            #expect(first.payload?.data.recipients?.map(\.account) == ["bob"])
            #expect(first.payload?.data.recipients?.map(\.muted) == [true])
            #expect(first.payload?.data.message?.ext == ["orderId": "A-17"], "the message's ext travels with it")
            #expect(bobToken.token == "fcm-token-of-bob" && bobToken.platform == .fcm && bobToken.device == "phone")

            // A recall of it: the notice is pushed to whoever lacks it, with the recall's push text.
            _ = try await alice.recall(missed.id, in: direct, pushText: "Alice recalled a message")
            pushDelayPasses()
            let recall = try #require(await receiver.next())
            #expect(recall.payload?.data.message?.recall?.messageID == missed.id)
            #expect(recall.payload?.data.message?.recall?.pushText == "Alice recalled a message")
            #expect(recall.payload?.data.recipients?.map(\.account) == ["bob"])

            // A group: Carol is online, Bob, Dave and Erin are not. Two recipients travel with the event, the rest
            // are paged through the REST API; the sender is never one.
            let carol = try await server.connectedClient("carol")
            let carolEvents = carol.events()
            let team = ConversationID.group("team")
            _ = try await alice.createGroup("team", members: ["bob", "carol", "dave", "erin"])
            let news = try await alice.send("news", to: team).stored()
            _ = try await carolEvents.first { $0.receivedMessage?.id == news.id ? true : nil }
            try await carol.markRead(news.id, in: team)  // acknowledged: Carol has it, whatever her delivery report
            pushDelayPasses()
            let grouped = try #require(await receiver.collect { $0.last?.payload?.data.message?.id == news.id }.last)
            #expect(grouped.payload?.data.recipients?.map(\.account) == ["bob", "dave"])
            #expect(grouped.payload?.data.recipients?.map(\.muted) == [false, false], "muted in the direct chat only")
            #expect(grouped.payload?.data.nextCursor == "dave")
            let base = "/v1/conversations/\(team.rawValue)/messages/\(news.id.rawValue)/undelivered"
            let (status, body) = try await server.restResponse("GET", base + "?cursor=dave")
            #expect(status == 200)
            let rest = try JSONDecoder().decode(Undelivered.self, from: body)
            #expect(rest.recipients.map(\.account) == ["erin"] && rest.nextCursor == nil)
            let (unknown, problem) = try await server.restResponse("GET", "/v1/conversations/\(team.rawValue)/messages/nope/undelivered")
            #expect(unknown == 404 && String(decoding: problem, as: UTF8.self).contains("message.notFound"))
            let (badLimit, _) = try await server.restResponse("GET", base + "?limit=0")
            #expect(badLimit == 400)

            // Once Bob's phone is back and has caught up, he is no longer among them.
            _ = try await server.connectedClient("bob", device: "phone")
            _ = try await aliceEvents.first { $0.deliveryUpdate.flatMap { $0.watermark.seq >= recall.payload!.data.message!.seq ? true : nil } }
            let directPath = "/v1/conversations/\(direct.rawValue)/messages/\(missed.id.rawValue)/undelivered"
            let (afterStatus, afterBody) = try await server.restResponse("GET", directPath)
            #expect(afterStatus == 200)
            #expect(try JSONDecoder().decode(Undelivered.self, from: afterBody).recipients.isEmpty)
            // One event per message and recall (none for the group's creation notice), the one Bob had at once among
            // them: it was done without a request. The recalled message's own push went with its body (ADR 0028).
            let recorded = try await Self.deliveries(server, created.id)
            #expect(recorded.count == 3 && recorded.allSatisfy { $0.type == "message.undelivered" })
        }
    }

    /// `courier_webhook_deliveries_total` of one type, read from a node's `/metrics`.
    static func deliveredCount(_ server: TestServer, type: String) async throws -> Int {
        let (status, body) = try await server.restResponse("GET", "/metrics")
        #expect(status == 200)
        let prefix = #"courier_webhook_deliveries_total{type="\#(type)"} "#
        return String(decoding: body, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix(prefix) }
            .flatMap { Double($0.dropFirst(prefix.count)) }
            .map { Int($0) } ?? 0
    }

    @Test(
        "two nodes on one PostgreSQL database deliver every event once between them",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func twoNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url, configure: Self.fastRetries) { nodeA, nodeB in
                let nodes = [nodeA, nodeB]
                let senders = (0..<8).map { AccountID(rawValue: "sender\($0)") }
                for account in senders + ["peer"] { try await nodes[0].server.register(account) }
                let port = try await freePort()
                let path = WebhookReceiver.uniquePath()
                let created = try await Self.endpoint(nodes[0].server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
                let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret])
                defer { receiver.stop() }
                // Half the senders on each node, each into its own conversation: both nodes record and both deliver.
                let perSender = 50
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, account) in senders.enumerated() {
                        group.addTask {
                            let client = try await nodes[index % 2].server.connectedClient(account)
                            for number in 1...perSender {
                                _ = try await client.send("m\(number)", to: .direct(account, "peer")).stored()
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let total = senders.count * perSender
                var arrivals: [String: Int] = [:]
                var firstSeqs: [String: [Seq]] = [:]
                while Set(arrivals.keys).count < total, let delivery = await receiver.next() {
                    #expect(delivery.verified)
                    guard let id = delivery.id, let message = delivery.payload?.data.message else { continue }
                    arrivals[id, default: 0] += 1
                    if arrivals[id] == 1 { firstSeqs[message.conversation.rawValue, default: []].append(message.seq) }
                }
                #expect(arrivals.count == total)
                #expect(arrivals.values.allSatisfy { $0 == 1 }, "an event delivered twice: \(arrivals.filter { $0.value > 1 }.count)")
                for (conversation, seqs) in firstSeqs {
                    #expect(seqs == seqs.sorted(), "\(conversation) out of order")
                }
                // Both nodes' counters together: each event counted once, by the node that delivered it. A node counts a
                // delivery once it has read the receiver's answer, a moment after the receiver has the event: read the
                // counters until they add up (at most 5 s), never past the total.
                var counted: [Int] = []
                let deadline = ContinuousClock.now + .seconds(5)
                repeat {
                    counted = []
                    for node in nodes { counted.append(try await Self.deliveredCount(node.server, type: "message.created")) }
                    if counted.reduce(0, +) >= total || ContinuousClock.now > deadline { break }
                    try await Task.sleep(for: .milliseconds(20))
                } while true
                print("two nodes: \(total) events delivered, \(counted) by node")
                #expect(counted.reduce(0, +) == total)
            }
        }
    }

    @Test("a receiver that fails, then is gone, then is back: deliveries wait, are retried, and drain in order")
    func receiverAway() async throws {
        try await withTestServer(configure: Self.fastRetries) { server in
            try await server.register("alice", "bob")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await Self.endpoint(server, url: "http://127.0.0.1:\(port)\(path)", events: ["message.created"])
            // First a receiver that answers 503: the conversation's first delivery is tried again and again, the
            // others wait behind it.
            let failing = try await WebhookReceiver(port: port, path: path, secrets: [created.secret], failStatus: 503)
            let alice = try await server.connectedClient("alice")
            let direct = ConversationID.direct("alice", "bob")
            var sent: [MessageID] = []
            for index in 1...40 { sent.append(try await alice.send("m\(index)", to: direct).stored().id) }
            let refused = await failing.collect { $0.count >= 3 }
            #expect(Set(refused.compactMap { $0.payload?.data.message?.id }) == [sent[0]])
            #expect(Set(refused.compactMap(\.id)).count == 1)  // the same webhook-id on every retry
            // Then nobody listens (connections refused) while more is sent.
            failing.stop()
            for index in 41...60 { sent.append(try await alice.send("m\(index)", to: direct).stored().id) }

            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret])
            defer { receiver.stop() }
            var ids: [MessageID] = []
            while ids.count < 60, let delivery = await receiver.next() {
                #expect(delivery.verified)
                if let id = delivery.payload?.data.message?.id, !ids.contains(id) { ids.append(id) }
            }
            #expect(ids == sent)
            // A node records a run's outcomes after its last delivery: the receiver may have the sixtieth before it
            // is recorded. The conversation's next event goes out only once it is, so once that one arrives the
            // sixty show as delivered.
            let sentinel = try await alice.send("after", to: direct).stored()
            while let delivery = await receiver.next(), delivery.payload?.data.message?.id != sentinel.id {}
            let delivered = try await Self.deliveries(server, created.id).dropFirst()  // newest first: the sentinel goes
            #expect(delivered.count == 60 && delivered.allSatisfy { $0.state == "delivered" }, "\(delivered.map(\.state))")
            #expect(delivered.last.map { $0.attempts >= 4 } == true)  // the oldest, tried while the receiver was away
        }
    }

    @Test("deliveries that fail past the retry period are kept as failed and retried through the API", arguments: ServerBackend.available)
    func failedAndRetried(backend: ServerBackend) async throws {
        try await withTestServer(on: backend, configure: Self.shortRetryPeriod) { server in
            try await server.register("alice", "bob")
            let port = try await freePort()
            let path = WebhookReceiver.uniquePath()
            let created = try await Self.endpoint(server, url: "http://127.0.0.1:\(port)\(path)")
            let failing = try await WebhookReceiver(port: port, path: path, secrets: [created.secret], failStatus: 503)
            let alice = try await server.connectedClient("alice")
            let message = try await alice.send("hello", to: .direct("alice", "bob")).stored()
            // One refusal at least (under load the period may be over after the first).
            _ = await failing.collect { $0.count >= 1 }
            failing.stop()
            // Past the period the delivery is failed, with what the endpoint answered.
            var failed: [Delivery] = []
            for _ in 0..<200 where failed.isEmpty {
                failed = try await Self.deliveries(server, created.id, state: "failed")
                if failed.isEmpty { try await Task.sleep(for: .milliseconds(50)) }  // polling a state, bounded
            }
            #expect(failed.count == 1 && failed[0].attempts >= 1)

            let receiver = try await WebhookReceiver(port: port, path: path, secrets: [created.secret])
            defer { receiver.stop() }
            let (status, body) = try await server.restResponse("POST", "/v1/webhooks/\(created.id)/retry-failed")
            #expect(status == 200)
            #expect(try JSONDecoder().decode(Retried.self, from: body).retried == 1)
            let redelivered = await receiver.next()
            #expect(redelivered?.verified == true && redelivered?.status == 204)
            #expect(redelivered?.payload?.data.message?.id == message.id)
            let unknown = try await server.rest("POST", "/v1/webhooks/whep_none/retry-failed")
            #expect(unknown.status == 404 && unknown.code == "request.notFound")
            let again = try await server.rest("POST", "/v1/webhooks/\(created.id)/deliveries/\(failed[0].seq)/retry")
            #expect(again.status == 404)
        }
    }
}

