// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Synchronization
import Testing

/// SPEC §9: the backends cannot disagree. Random programs of sends (direct and group, asking for receipts or not),
/// deliveries, every kind of read (message ids, seq, time, all, private), read-receipt settings, joins, removals,
/// leaves, re-adds, role changes and ownership transfers, two-way and one-way recalls by senders, admins, owners and
/// the app, and queries (unread counts, history, sync — from scratch the first time, then with the `since` the
/// account's previous sync handed out, ADR 0017 — receipt counts and lists) run step by step on a server on SQLite,
/// on one on PostgreSQL (when `COURIER_TEST_POSTGRES_URL` names one), and on a pure in-memory model of the rules
/// (``DifferentialModel``), with the same injected clock.
///
/// - The two servers must give the same answer to every step — ack or error code, with server-assigned ids replaced
///   by their order of appearance, `since` cursors (each database's own) masked and JSON keys sorted — and a sync
///   since a cursor answers the same conversations and entries.
/// - Each server's answers must hold the facts the model predicts: acks and error codes, seqs, read positions and
///   unread counts, delivery watermarks, receipt counts and lists, history with its tombstones and quotes.
///
/// Programs come from fixed seeds plus a fresh one per run (printed; `COURIER_DIFFERENTIAL_SEED=N` replays one,
/// `COURIER_DIFFERENTIAL_PROGRAMS=N` adds N fresh ones, `COURIER_DIFFERENTIAL_DUMP=1` prints SQLite's answers and facts). A
/// divergence is shrunk to a minimal program by removing steps, and printed.
///
/// Events are compared too, between the servers, per account: after each step every connection answers one more
/// request, and since a device's acks and events leave the server in one order, each account has then received every
/// event the step caused (the server publishes a request's events before it reads that connection's next request,
/// and the REST API publishes before it answers). Each step's answer ends with the events each account got, in the
/// order it got them (but `syncRequired`, which a PostgreSQL node sends whenever its change listener connects, at no
/// fixed step).
@Suite(
    "Backends and the model agree on every answer",
    .timeLimit(.minutes(8))  // 30 s alone, 80 s under ThreadSanitizer; CI shares the cores with the whole suite
)
struct DifferentialTests {
    static let fixedSeeds: [UInt64] = Array(1...12)
    static let steps = 60

    @Test("random programs answer the same on SQLite, PostgreSQL and the model")
    func backendsAgree() async throws {
        let replay = ProcessInfo.processInfo.environment["COURIER_DIFFERENTIAL_SEED"].flatMap(UInt64.init)
        let fresh = UInt64.random(in: 1...UInt64.max)
        // COURIER_DIFFERENTIAL_PROGRAMS=N adds N more fresh programs, for a longer hunt than CI's.
        let more = ProcessInfo.processInfo.environment["COURIER_DIFFERENTIAL_PROGRAMS"].flatMap(Int.init) ?? 0
        let seeds = replay.map { [$0] } ?? Self.fixedSeeds + [fresh] + (0..<more).map { fresh &+ UInt64($0) &+ 1 }
        print("differential test: fresh seed \(fresh) (replay with COURIER_DIFFERENTIAL_SEED=\(fresh))")
        var programs = 0
        var steps = 0
        for seed in seeds {
            let program = Self.program(seed: seed)
            programs += 1
            steps += program.count
            guard let divergence = try await Self.divergence(in: program) else { continue }
            let minimal = try await Self.shrink(program)
            let shown = try await Self.divergence(in: minimal) ?? divergence
            Issue.record(
                """
                seed \(seed): \(shown.what) at step \(shown.step).
                minimal program (\(minimal.count) steps): \(minimal.map { DifferentialStep($0).description }.joined(separator: "; "))
                \(shown.details)
                """
            )
        }
        print("differential test: \(programs) programs, \(steps) steps, each on \(ServerBackend.available) and the model")
    }

    static func program(seed: UInt64) -> [Int] {
        var generator = SplitMix64(seed: seed)
        return (0..<steps).map { _ in Int(generator.next() % 1_000_000) }
    }

    struct Divergence {
        let step: Int
        /// Who disagrees.
        let what: String
        let details: String
    }

    /// Runs `program` on each backend; the first disagreement, between the servers or with the model.
    static func divergence(in program: [Int]) async throws -> Divergence? {
        var outcomes: [(backend: ServerBackend, outcome: DifferentialRun.Outcome)] = []
        for backend in ServerBackend.available {
            // The same clock on both: it starts at the same instant and moves one second per step.
            let clock = Counter(1_700_000_000_000)
            let configure: (inout CourierServerConfiguration) -> Void = { configuration in
                configuration.now = { Timestamp(milliseconds: clock.value) }
            }
            outcomes.append(
                (backend, try await withTestServer(on: backend, configure: configure) { server in
                    try await DifferentialRun.run(server, program, clock: clock)
                })
            )
        }
        let sqlite = outcomes[0].outcome.answers
        if ProcessInfo.processInfo.environment["COURIER_DIFFERENTIAL_DUMP"] != nil {
            for (line, facts) in zip(sqlite, outcomes[0].outcome.facts) { print("DUMP " + line.prefix(300) + "\nFACTS " + facts) }
        }
        if outcomes.count > 1 {
            let postgres = outcomes[1].outcome.answers
            for index in 0..<max(sqlite.count, postgres.count) {
                let left = index < sqlite.count ? sqlite[index] : "(none)"
                let right = index < postgres.count ? postgres[index] : "(none)"
                if left != right {
                    return Divergence(
                        step: index,
                        what: "the backends answer differently",
                        details: "SQLite:     \(left)\nPostgreSQL: \(right)"
                    )
                }
            }
        }
        for (backend, outcome) in outcomes {
            if let mismatch = outcome.modelMismatch {
                return Divergence(
                    step: mismatch.step,
                    what: "\(backend) and the model disagree",
                    details: "\(backend): \(mismatch.server)\nmodel: \(mismatch.model)\nanswer: \(outcome.answers[mismatch.step].prefix(600))"
                )
            }
        }
        return nil
    }

    /// Removes steps while a disagreement remains (at most 80 runs).
    static func shrink(_ program: [Int]) async throws -> [Int] {
        var current = program
        var attempts = 0
        var chunk = max(1, current.count / 2)
        while chunk >= 1 && attempts < 80 {
            var index = 0
            var removedAny = false
            while index < current.count && attempts < 80 {
                var candidate = current
                candidate.removeSubrange(index..<min(index + chunk, candidate.count))
                attempts += 1
                if try await divergence(in: candidate) != nil {
                    current = candidate
                    removedAny = true
                } else {
                    index += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        return current
    }
}

/// A clock value several tasks read and one moves. (`Locked`, not `Mutex`: ThreadSanitizer does not see `Mutex`'s
/// futex hand-offs on Linux, and CI runs this test under it.)
final class Counter: Sendable {
    private let current: Locked<Int64>
    init(_ initial: Int64) { current = Locked(initial) }
    var value: Int64 { current.withLock { $0 } }
    func advance(by amount: Int64) { current.withLock { $0 += amount } }
}

/// One step, decoded from a number (so that a program is a list of numbers, and shrinking removes numbers).
struct DifferentialStep: CustomStringConvertible {
    enum Kind: Int, CaseIterable {
        case send, sendAsking, deliver, readMessages, readSeq, readTime, readAll, readPrivately, settings, add, remove,
            leave, setRole, transfer, recall, appRecall, counts, list, unread, history, sync
    }
    let kind: Kind
    /// The acting account's index.
    let actor: Int
    /// Which of the actor's two devices acts (their second device is "a'", "b'", …).
    let device: Int
    /// Further choices (conversation, target, message, flags), decoded by each kind.
    let choice: Int

    /// How often each kind comes up: sends and reads most, so that there is something to read, recall and count.
    static let weighted: [Kind] = Kind.allCases.flatMap { kind -> [Kind] in
        switch kind {
        case .send: [kind, kind, kind]
        case .sendAsking, .add, .readAll: [kind, kind]
        default: [kind]
        }
    }

    init(_ number: Int) {
        kind = Self.weighted[number % Self.weighted.count]
        actor = (number / Self.weighted.count) % DifferentialRun.accounts.count
        choice = number / (Self.weighted.count * DifferentialRun.accounts.count)
        device = (number / 500_000) % 2
    }

    var description: String {
        "\(kind)(\(DifferentialDevice(account: DifferentialRun.accounts[actor], index: device)), \(choice))"
    }
}

/// One of an account's two connected devices: `a` and `a'`.
struct DifferentialDevice: Hashable, Sendable, CustomStringConvertible {
    let account: AccountID
    let index: Int
    var description: String { index == 0 ? account.rawValue : account.rawValue + "'" }
    var id: DeviceID { DeviceID(rawValue: index == 0 ? "phone" : "tablet") }
}

/// One program on one server: four accounts with two connected devices each, three direct conversations and a group.
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

    let server: TestServer
    let clients: [DifferentialDevice: ProtocolClient]
    let events: EventLog
    let clock: Counter
    /// Messages acknowledged so far, per conversation (the programs pick among them).
    private let known = Locked<[ConversationID: [Known]]>([:])
    /// Server-assigned ids in their order of first appearance.
    private let idOrder = Locked<[String: Int]>([:])
    /// The `since` each device's last completed sync handed out.
    private let lastSince = Locked<[DifferentialDevice: String]>([:])
    private let clientIDs = Atomic<Int>(0)
    /// The client id of each acknowledged send, by its server id.
    private let names = Locked<[MessageID: String]>([:])

    init(server: TestServer, clients: [DifferentialDevice: ProtocolClient], events: EventLog, clock: Counter) {
        self.server = server
        self.clients = clients
        self.events = events
        self.clock = clock
    }

    /// The events each device received, as the server encoded them, until taken.
    final class EventLog: Sendable {
        /// Appended to by each client's receiving task: `Locked`, which ThreadSanitizer observes (see `Counter`).
        private let received = Locked<[DifferentialDevice: [String]]>([:])
        private let coder = FrameCoder()
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

    /// Runs `program` on `server`, and the model beside it.
    static func run(_ server: TestServer, _ program: [Int], clock: Counter) async throws -> Outcome {
        for account in accounts { try await server.register(account) }
        let events = EventLog()
        return try await withClients(devices, server: server, events: events, [:]) { clients in
            let run = DifferentialRun(server: server, clients: clients, events: events, clock: clock)
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
            for (check, expected) in zip(try await run.finalChecks(), model.finalChecks()) {
                outcome.record(check.answer, facts: check.facts, expected: expected)
            }
            return outcome
        }
    }

    /// Connects each device in turn and runs `body` with all of them connected.
    static func withClients<T: Sendable>(
        _ remaining: [DifferentialDevice],
        server: TestServer,
        events: EventLog,
        _ connected: [DifferentialDevice: ProtocolClient],
        _ body: @escaping @Sendable ([DifferentialDevice: ProtocolClient]) async throws -> T
    ) async throws -> T {
        guard let device = remaining.first else { return try await body(connected) }
        let client = ProtocolClient { event in events.append(event, for: device) }
        let box = Locked<T?>(nil)
        try await client.run(
            url: server.webSocketURL.absoluteString,
            token: try await server.token(for: device.account),
            account: device.account,
            device: device.id
        ) {
            var connected = connected
            connected[device] = client
            let value = try await withClients(Array(remaining.dropFirst()), server: server, events: events, connected, body)
            box.withLock { $0 = value }
        }
        return try #require(box.withLock { $0 })
    }

    /// The answer to `step` in canonical form, and the facts the model predicts (``DifferentialModel``).
    func perform(_ step: DifferentialStep) async throws -> (answer: String, facts: String) {
        let account = Self.accounts[step.actor]
        let me = DifferentialDevice(account: account, index: step.device)
        let choice = step.choice
        let mine = Self.conversations.filter { conversation in
            guard let (one, two) = conversation.directMembers else { return true }
            return one == account || two == account
        }
        let conversation = mine[choice % mine.count]
        let others = Self.accounts.filter { $0 != account }
        let other = others[choice % others.count]
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
            answers.append(("final sync \(device): " + sync.text, facts(sync.frame) { ack in
                guard case .sync = ack else { return nil }
                return "synced"
            }))
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
        var text = ""
        for device in Self.devices {
            guard let list = received[device], !list.isEmpty else { continue }
            text += " | events \(device): " + list.map(canonical).joined(separator: ", ")
        }
        return text
    }

    /// The group's messages that asked for read receipts.
    private func asking() -> [Known] {
        (known.withLock { $0[Self.group] } ?? []).filter(\.asked)
    }

    private func message(in conversation: ConversationID, pick: Int) -> Known? {
        let messages = known.withLock { $0[conversation] } ?? []
        return messages.isEmpty ? nil : messages[pick % messages.count]
    }

    /// A request's answer in canonical form.
    private func ask(_ device: DifferentialDevice, _ make: (RequestID) -> ClientFrame) async -> String {
        await raw(device, make).text
    }

    func raw(_ device: DifferentialDevice, _ make: (RequestID) -> ClientFrame) async -> (frame: ServerFrame?, text: String) {
        do {
            let frame = try await clients[device]!.request(make)
            switch frame {
            case .error(_, let error): return (frame, "error \(error.code)")
            default: return (frame, canonical(FrameCoder().encode(frame)))
            }
        } catch {
            return (nil, "failed: \(error)")
        }
    }

    private func appRecall(_ id: MessageID, in conversation: ConversationID, mode: String) async throws -> (text: String, facts: String) {
        let (status, data) = try await server.restResponse(
            "POST",
            "v1/conversations/\(conversation)/recall",
            body: #"{"messageId":"\#(id)","mode":"\#(mode)"}"#
        )
        let facts: String
        if status == 200, let ack = try? JSONDecoder().decode(SendAck.self, from: data) {
            facts = "recall \(ack.message.seq.rawValue) dup \(ack.duplicate)"
        } else if let problem = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let code = problem["code"] as? String {
            facts = "error \(code)"
        } else {
            facts = "REST \(status)"
        }
        return ("REST \(status) " + canonical(String(decoding: data, as: UTF8.self)), facts)
    }

    // MARK: Facts (what the model predicts, read from the answers)

    /// An error's code, or what `describe` reads from the ack.
    func facts(_ frame: ServerFrame?, _ describe: (Ack) -> String?) -> String {
        switch frame {
        case nil: "failed"
        case .error(_, let error)?: "error \(error.code.rawValue)"
        case .ack(_, let ack)?: describe(ack) ?? "unexpected ack"
        case .event?: "unexpected event"
        }
    }

    private func readAnswer(_ label: String, _ reply: (frame: ServerFrame?, text: String)) -> (answer: String, facts: String) {
        (label + reply.text, facts(reply.frame) { ack in
            guard case .read(let state) = ack else { return nil }
            return "read \(state.watermark.seq.rawValue) \(state.readSeqs.map(\.rawValue)) unread \(state.unreadCount)"
        })
    }

    private func unreadFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .unread(let unread) = ack else { return nil }
            let counts = unread.conversations.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key)=\($0.value)" }
            return "unread \(counts) total \(unread.total)"
        }
    }

    private func countFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .receiptCounts(let ack) = ack else { return nil }
            return "counts \(ack.counts.map { count in name(count.messageID) + (count.recalled == true ? " recalled" : " \(count.readCount)/\(count.unreadCount)") })"
        }
    }

    private func historyFacts(_ frame: ServerFrame?) -> String {
        facts(frame) { ack in
            guard case .history(let history) = ack else { return nil }
            let lines = history.messages.map { message -> String in
                if let change = message.group {
                    let accounts = change.accounts.map(\.rawValue).joined(separator: ", ")
                    return "\(message.seq.rawValue) \(change.action.rawValue) [\(accounts)]" + (change.role.map { " \($0.rawValue)" } ?? "")
                }
                if let notice = message.recall {
                    return "\(message.seq.rawValue) recall \(name(notice.messageID)) \(notice.mode) by \(notice.recalledBy)"
                }
                return "\(message.seq.rawValue) \(message.clientID) \(message.isRecalled ? "recalled" : message.body) q=\(message.quote ?? "-")"
                    + " t=\(message.type ?? "-")\(message.needsReadReceipt == true ? " asks" : "")"
            }
            return "history \(lines) more \(history.hasMore)"
        }
    }

    /// A message by the client id it was sent with (the model's name for it).
    private func name(_ id: MessageID) -> String { names.withLock { $0[id] } ?? id.rawValue }

    /// JSON with sorted keys, and every server-assigned id (a UUID) replaced by its order of first appearance.
    private func canonical(_ json: String) -> String {
        var text = json
        if let object = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed),
            let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        {
            text = String(decoding: sorted, as: UTF8.self)
        }
        // A cursor names its database and its stamps: what it brings is compared, not its text.
        text = text.replacing(/"since":"[^"]*"/) { _ in #""since":"…""# }
        let pattern = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/
        return text.replacing(pattern) { match in
            let id = String(match.output)
            let index = idOrder.withLock { table in
                if let index = table[id] { return index }
                table[id] = table.count + 1
                return table.count
            }
            return "#\(index)"
        }
    }
}

/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64), so a seed names a program.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
