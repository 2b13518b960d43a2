// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

/// One program on one server, or on two nodes sharing one database (each account's first device on the first node, its
/// second on the other, the app's requests alternating): four accounts with two connected devices each, three direct
/// conversations and a group.
final class DifferentialRun: Sendable {
    static let accounts: [AccountID] = ["a", "b", "c", "d"]
    static let devices: [DifferentialDevice] = accounts.flatMap { account in
        [0, 1].map { DifferentialDevice(account: account, index: $0) }
    }
    static let group = ConversationID.group("g")
    static let conversations: [ConversationID] = [.direct("a", "b"), .direct("a", "c"), .direct("b", "c"), group]

    struct Known: Sendable {
        let id: MessageID
        let seq: Seq
        let time: Timestamp
        /// A group message that asked for read receipts.
        let asked: Bool
    }

    /// The nodes the program runs on (one, or two sharing a database).
    let servers: [TestServer]
    /// The app's requests so far: they alternate between the nodes.
    let appRequests = Atomic<Int>(0)
    let clients: [DifferentialDevice: ProtocolClient]
    let events: EventLog
    let clock: Counter
    /// Messages acknowledged so far, per conversation (the programs pick among them).
    let known = Locked<[ConversationID: [Known]]>([:])
    /// Server-assigned ids in their order of first appearance.
    let idOrder = Locked<[String: Int]>([:])
    /// The `since` each device's last completed sync handed out.
    let lastSince = Locked<[DifferentialDevice: String]>([:])
    let clientIDs = Atomic<Int>(0)
    /// The client id of each acknowledged send, by its server id.
    let names = Locked<[MessageID: String]>([:])

    init(servers: [TestServer], clients: [DifferentialDevice: ProtocolClient], events: EventLog, clock: Counter) {
        self.servers = servers
        self.clients = clients
        self.events = events
        self.clock = clock
    }

    /// The events each device received, as the server encoded them, until taken.
    final class EventLog: Sendable {
        /// Appended to by each client's receiving task: `Locked`, which ThreadSanitizer observes (see `Counter`).
        let received = Locked<[DifferentialDevice: [String]]>([:])
        let coder = FrameCoder()
        func append(_ event: ServerEvent, for device: DifferentialDevice) {
            // `syncRequired` is advice tied to a node's change listener, not to a step: on PostgreSQL a node sends it
            // to every device when its listener (re)connects, which under load can fall after the first steps.
            if case .syncRequired = event { return }
            let text = coder.encode(ServerFrame.event(event))
            received.withLock { $0[device, default: []].append(text) }
        }
        func take() -> [DifferentialDevice: [String]] { received.withLock { log in defer { log = [:] }; return log } }
    }

    /// What one program answered on one server.
    struct Outcome: Sendable {
        /// The canonical answer to each step (and to the set-up and the final checks).
        var answers: [String] = []
        /// Each step's facts as the server answered them.
        var facts: [String] = []
        /// The first step whose facts differ from the model's: the step, the server's facts, the model's.
        var modelMismatch: (step: Int, server: String, model: String)?

        mutating func record(_ answer: String, facts: String, expected: String) {
            if modelMismatch == nil, facts != expected { modelMismatch = (answers.count, facts, expected) }
            answers.append(answer)
            self.facts.append(facts)
        }
    }

    /// Runs `program` on `servers` (one node, or two sharing a database), and the model beside it.
    static func run(_ servers: [TestServer], _ program: [Int], clock: Counter) async throws -> Outcome {
        for account in accounts { try await servers[0].register(account) }
        let events = EventLog()
        return try await withClients(devices, servers: servers, events: events, [:]) { clients in
            let run = DifferentialRun(servers: servers, clients: clients, events: events, clock: clock)
            var outcome = Outcome()
            var model = DifferentialModel(now: clock.value)
            let owner = DifferentialDevice(account: "a", index: 0)
            let created = await run.raw(owner) {
                .createGroup($0, CreateGroupRequest(group: "g", clientID: "g-created", members: ["b", "c"]))
            }
            let createdFacts = run.facts(created.frame) { ack in
                guard case .createGroup(let ack) = ack else { return nil }
                return "entry \(ack.message.seq.rawValue)"
            }
            outcome.record(
                created.text + (try await run.eventsSinceLastStep(acting: owner)),
                facts: createdFacts,
                expected: model.create()
            )
            for number in program {
                clock.advance(by: 1000)
                let step = DifferentialStep(number)
                let (answer, facts) = try await run.perform(step)
                let acting = DifferentialDevice(account: accounts[step.actor], index: step.device)
                outcome.record(
                    answer + (try await run.eventsSinceLastStep(acting: acting)),
                    facts: facts,
                    expected: model.apply(step, at: clock.value)
                )
            }
            let (checks, expected) = (try await run.finalChecks(), model.finalChecks())
            for index in 0..<max(checks.count, expected.count) {
                outcome.record(
                    index < checks.count ? checks[index].answer : "(none)",
                    facts: index < checks.count ? checks[index].facts : "(no check)",
                    expected: index < expected.count ? expected[index] : "(no prediction)"
                )
            }
            return outcome
        }
    }

    /// Connects each device in turn and runs `body` with all of them connected.
    static func withClients<T: Sendable>(
        _ remaining: [DifferentialDevice],
        servers: [TestServer],
        events: EventLog,
        _ connected: [DifferentialDevice: ProtocolClient],
        _ body: @escaping @Sendable ([DifferentialDevice: ProtocolClient]) async throws -> T
    ) async throws -> T {
        guard let device = remaining.first else { return try await body(connected) }
        let client = ProtocolClient { event in events.append(event, for: device) }
        let box = Locked<T?>(nil)
        let server = servers[device.index % servers.count]
        try await client.run(
            url: server.webSocketURL.absoluteString,
            token: try await server.token(for: device.account),
            account: device.account,
            device: device.id
        ) {
            var connected = connected
            connected[device] = client
            let value = try await withClients(Array(remaining.dropFirst()), servers: servers, events: events, connected, body)
            box.withLock { $0 = value }
        }
        return try #require(box.withLock { $0 })
    }

    /// The answer to `step` in canonical form, and the facts the model predicts (``DifferentialModel``).
    func perform(_ step: DifferentialStep) async throws -> (answer: String, facts: String) {
        let me = DifferentialDevice(account: step.account, index: step.device)
        let (choice, conversation, other) = (step.choice, step.conversation, step.other)
        let picked = message(in: conversation, pick: choice / 7)
        let label = "\(step) in \(conversation): "
        switch step.kind {
        case .send, .sendAsking:
            let clientID = ClientMessageID(rawValue: "m\(clientIDs.wrappingAdd(1, ordering: .relaxed).newValue)")
            // Some typed (stored and quoted differently), some replies (quotes taken from the store).
            let request = SendRequest(
                conversation: conversation,
                clientID: clientID,
                type: [nil, "image", "text", "app.card", nil][choice % 5],
                body: "body \(clientID)",
                replyTo: choice % 3 == 0 ? picked?.id : nil,
                needsReadReceipt: step.kind == .sendAsking ? true : nil
            )
            let reply = await raw(me) { .send($0, request) }
            if case .ack(_, .send(let ack)) = reply.frame {
                let entry = Known(
                    id: ack.message.id,
                    seq: ack.message.seq,
                    time: ack.message.time,
                    asked: ack.message.needsReadReceipt == true
                )
                known.withLock { $0[conversation, default: []].append(entry) }
                names.withLock { $0[ack.message.id] = ack.message.clientID.rawValue }
            }
            return (label + reply.text, facts(reply.frame) { ack in
                guard case .send(let ack) = ack else { return nil }
                return "sent \(ack.message.seq.rawValue) quote \(ack.message.quote ?? "-")"
            })
        case .deliver:
            let reply = await raw(me) { .deliver($0, DeliverRequest(conversation: conversation, seq: picked?.seq ?? Seq(1))) }
            return (label + reply.text, facts(reply.frame) { ack in
                guard case .deliver(let ack) = ack else { return nil }
                return "delivered \(ack.watermark.seq.rawValue)"
            })
        case .readMessages:
            let ids = [picked?.id, message(in: conversation, pick: choice / 11)?.id].compactMap { $0 }
            return readAnswer(label, await raw(me) { .read($0, ReadRequest(conversation: conversation, messageIDs: Array(Set(ids)).sorted { $0.rawValue < $1.rawValue })) })
        case .readSeq:
            return readAnswer(label, await raw(me) { .read($0, ReadRequest(conversation: conversation, seq: picked?.seq ?? Seq(1))) })
        case .readTime:
            return readAnswer(label, await raw(me) { .read($0, ReadRequest(conversation: conversation, time: picked?.time ?? Timestamp(milliseconds: 0))) })
        case .readAll:
            return readAnswer(label, await raw(me) { .read($0, ReadRequest(conversation: conversation, all: true)) })
        case .readPrivately:
            return readAnswer(label, await raw(me) { .read($0, ReadRequest(conversation: conversation, all: true, isPrivate: true)) })
        case .settings:
            let scope: ConversationID? = choice % 3 == 0 ? nil : conversation
            let reply = await raw(me) { .readReceiptSettings($0, ReadReceiptSettingsRequest(conversation: scope, sendReadReceipts: choice % 2 == 0)) }
            return (label + reply.text, facts(reply.frame) { ack in
                guard case .readReceiptSettings(let settings) = ack else { return nil }
                let scoped = settings.conversations.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key)=\($0.value)" }
                return "settings \(settings.sendReadReceipts) \(scoped)"
            })
        case .add, .remove, .setRole, .transfer:
            let action: GroupChangeRequest.Action =
                switch step.kind {
                case .add: .add
                case .remove: .remove
                case .setRole: .setRole
                default: .transferOwnership
                }
            let role: MemberRole? = step.kind == .setRole ? (choice % 2 == 0 ? .admin : .member) : nil
            let request = GroupChangeRequest(
                conversation: Self.group,
                clientID: ClientMessageID(rawValue: "gc\(clientIDs.wrappingAdd(1, ordering: .relaxed).newValue)"),
                action: action,
                accounts: [other],
                role: role
            )
            let reply = await raw(me) { .groupChange($0, request) }
            return ("\(step): " + reply.text, facts(reply.frame) { ack in
                guard case .groupChange(let ack) = ack else { return nil }
                return "entry \(ack.message.seq.rawValue)"
            })
        case .leave:
            let request = GroupChangeRequest(
                conversation: Self.group,
                clientID: ClientMessageID(rawValue: "gc\(clientIDs.wrappingAdd(1, ordering: .relaxed).newValue)"),
                action: .leave
            )
            let reply = await raw(me) { .groupChange($0, request) }
            return ("\(step): " + reply.text, facts(reply.frame) { ack in
                guard case .groupChange(let ack) = ack else { return nil }
                return "entry \(ack.message.seq.rawValue)"
            })
        case .recall:
            guard let picked else { return (label + "no message", "no message") }
            let mode: RecallMode = choice % 2 == 0 ? .twoWay : .oneWay
            let reply = await raw(me) { .recall($0, RecallRequest(conversation: conversation, messageID: picked.id, mode: mode)) }
            return (label + reply.text, facts(reply.frame) { ack in
                guard case .recall(let ack) = ack else { return nil }
                return "recall \(ack.message.seq.rawValue) dup \(ack.duplicate)"
            })
        case .appRecall:
            guard let picked else { return (label + "no message", "no message") }
            let mode = choice % 2 == 0 ? "twoWay" : "oneWay"
            let answer = try await appRecall(picked.id, in: conversation, mode: mode)
            return (label + answer.text, answer.facts)
        case .counts:
            let ids = asking().map(\.id)
            guard !ids.isEmpty else { return (label + "no message", "no message") }
            let reply = await raw(me) { .receiptCounts($0, ReceiptCountsRequest(conversation: Self.group, messageIDs: Array(ids.suffix(100)))) }
            return ("\(step): " + reply.text, countFacts(reply.frame))
        case .list:
            let asked = asking()
            guard !asked.isEmpty else { return (label + "no message", "no message") }
            let target = asked[(choice / 3) % asked.count]
            let kinds: [ReceiptListKind] = [.read, .unread, .delivered]
            let list = kinds[choice % 3]
            var answer = await raw(me) {
                .receiptList($0, ReceiptListRequest(conversation: Self.group, messageID: target.id, list: list, limit: 1))
            }
            var text = answer.text
            var listed: [String] = []
            let first = answer.frame
            if case .ack(_, .receiptList(let page)) = first { listed += page.entries.map(\.account.rawValue) }
            // Follow the cursor once: it must page the same way on both.
            if case .ack(_, .receiptList(let page)) = answer.frame, let cursor = page.nextCursor {
                answer = await raw(me) {
                    .receiptList($0, ReceiptListRequest(conversation: Self.group, messageID: target.id, list: list, cursor: cursor, limit: 2))
                }
                text += " then " + answer.text
                if case .ack(_, .receiptList(let page)) = answer.frame { listed += page.entries.map(\.account.rawValue) }
            }
            return ("\(step): " + text, facts(first) { ack in
                guard case .receiptList(let page) = ack else { return nil }
                if page.recalled == true { return "list \(list) recalled" }
                return "list \(list) total \(page.total) \(listed.sorted())"
            })
        case .unread:
            let reply = await raw(me) { .unread($0) }
            return ("\(step): " + reply.text, unreadFacts(reply.frame))
        case .history:
            let reply = await raw(me) { .history($0, HistoryRequest(conversation: conversation, before: nil, limit: 5)) }
            return (label + reply.text, historyFacts(reply.frame))
        case .sync:
            let since = lastSince.withLock { $0[me] }
            let answer = await raw(me) { .sync($0, SyncRequest(cursors: [:], limit: 200, since: since)) }
            if case .ack(_, .sync(let ack)) = answer.frame, !ack.hasMore, let next = ack.since {
                lastSince.withLock { $0[me] = next }
            }
            return ("\(step)\(since == nil ? "" : " since the last"): " + answer.text, facts(answer.frame) { ack in
                guard case .sync = ack else { return nil }
                return "synced"
            })
        }
    }

    /// What every account can see at the end (from its first device; the second must agree on unread counts): unread
    /// counts, a sync from scratch, and the group's receipts. Each answer with its facts (``perform(_:)``).
    func finalChecks() async throws -> [(answer: String, facts: String)] {
        var answers: [(answer: String, facts: String)] = []
        let groupMessages = asking().map(\.id)
        for device in Self.devices where device.index == 0 {
            let unread = await raw(device) { .unread($0) }
            answers.append(("final unread \(device): " + unread.text, unreadFacts(unread.frame)))
            // Both devices of an account see the same counts (SPEC §9.7); their answers differ by request id only.
            let other = DifferentialDevice(account: device.account, index: 1)
            if case .ack(_, let counts) = unread.frame, case .ack(_, let otherCounts) = await raw(other, { .unread($0) }).frame {
                #expect(otherCounts == counts, "\(other) and \(device) disagree on unread counts")
            } else {
                Issue.record("\(device): no unread counts: \(unread.text)")
            }
            for conversation in Self.conversations {
                let history = await raw(device) { .history($0, HistoryRequest(conversation: conversation, before: nil, limit: 100)) }
                answers.append(("final history \(device) \(conversation): " + history.text, historyFacts(history.frame)))
            }
            let sync = await raw(device) { .sync($0, SyncRequest(cursors: [:], limit: 500)) }
            answers.append(("final sync \(device): " + sync.text, syncFacts(sync.frame)))
            if !groupMessages.isEmpty {
                let counts = await raw(device) {
                    .receiptCounts($0, ReceiptCountsRequest(conversation: Self.group, messageIDs: Array(groupMessages.suffix(100))))
                }
                answers.append(("final counts \(device): " + counts.text, countFacts(counts.frame)))
            }
        }
        return answers
    }

    /// The events each device received since the previous step, in canonical form. The acting device answers one
    /// more request first (the server publishes a request's events before it reads that connection's next request;
    /// the REST API publishes before it answers), then every device answers one (its events were queued before that
    /// answer), so each has received whatever the step caused.
    func eventsSinceLastStep(acting: DifferentialDevice) async throws -> String {
        _ = try await clients[acting]!.request { .unread($0) }
        for device in Self.devices {
            _ = try await clients[device]!.request { .unread($0) }
        }
        let received = events.take()
        // Across nodes, an event another node caused arrives when that node's notification does: at no fixed step.
        guard servers.count == 1 else { return "" }
        var text = ""
        for device in Self.devices {
            guard let list = received[device], !list.isEmpty else { continue }
            text += " | events \(device): " + list.map(canonical).joined(separator: ", ")
        }
        return text
    }
}
