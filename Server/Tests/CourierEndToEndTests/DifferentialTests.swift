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
            let found: Divergence?
            do { found = try await Self.divergence(in: program) } catch {
                // Which program, and the whole error (a PostgreSQL error's description alone says nothing).
                Issue.record("seed \(seed) failed: \(String(reflecting: error))")
                throw error
            }
            guard let divergence = found else { continue }
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

    @Test(
        "random programs run across two nodes on one PostgreSQL, requests alternating between them, agree with the model",
        .enabled(if: PostgresTestDatabase.isAvailable)
    )
    func acrossTwoNodes() async throws {
        let fresh = UInt64.random(in: 1...UInt64.max)
        print("differential test across two nodes: fresh seed \(fresh)")
        // Each account's first device on node A, its second on node B, the app's requests alternating: every step
        // after a change made through one node is answered through either (ADR 0023). Events are not compared here
        // (another node's arrive with its notification, at no fixed step); every answer's facts are.
        for seed in Array(Self.fixedSeeds.prefix(4)) + [fresh] {
            let program = Self.program(seed: seed)
            let clock = Counter(1_700_000_000_000)
            try await PostgresTestDatabase.withDatabase { url in
                let outcome = try await withTwoNodes(on: url, configure: Self.configuration(clock)) { nodeA, nodeB in
                    try await DifferentialRun.run([nodeA.server, nodeB.server], program, clock: clock)
                }
                if let mismatch = outcome.modelMismatch {
                    Issue.record(
                        """
                        seed \(seed): two nodes and the model disagree at step \(mismatch.step).
                        nodes: \(mismatch.server)
                        model: \(mismatch.model)
                        answer: \(outcome.answers[mismatch.step].prefix(600))
                        """
                    )
                }
            }
        }
    }

    /// The configuration every run shares: the injected clock, and recall windows a program outlives.
    static func configuration(_ clock: Counter) -> (inout CourierServerConfiguration) -> Void {
        { configuration in
            configuration.now = { Timestamp(milliseconds: clock.value) }
            // Windows a 60-step program (one second a step) outlives, so that recalls also expire.
            configuration.recallWindow = .milliseconds(DifferentialModel.recallWindow)
            configuration.adminRecallWindow = .milliseconds(DifferentialModel.adminRecallWindow)
        }
    }

    /// Runs `program` on each backend; the first disagreement, between the servers or with the model.
    static func divergence(in program: [Int]) async throws -> Divergence? {
        var outcomes: [(backend: ServerBackend, outcome: DifferentialRun.Outcome)] = []
        for backend in ServerBackend.available {
            // The same clock on both: it starts at the same instant and moves one second per step.
            let clock = Counter(1_700_000_000_000)
            outcomes.append(
                (backend, try await withTestServer(on: backend, configure: configuration(clock)) { server in
                    try await DifferentialRun.run([server], program, clock: clock)
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
        let drawn = (number / Self.weighted.count) % DifferentialRun.accounts.count
        choice = number / (Self.weighted.count * DifferentialRun.accounts.count)
        // Half of the adds, removals, role changes and transfers come from `a`, the group's first owner, so that
        // membership changes succeed often rather than being refused to ordinary members.
        let managing: [Kind] = [.add, .remove, .setRole, .transfer]
        actor = managing.contains(kind) && (number / 7) % 2 == 0 ? 0 : drawn
        device = (number / 500_000) % 2
    }

    var description: String {
        "\(kind)(\(DifferentialDevice(account: DifferentialRun.accounts[actor], index: device)), \(choice))"
    }

    /// The acting account.
    var account: AccountID { DifferentialRun.accounts[actor] }
    /// The conversation it acts in: one of its direct conversations, or the group.
    var conversation: ConversationID {
        let mine = DifferentialRun.conversations.filter { conversation in
            guard let (one, two) = conversation.directMembers else { return true }
            return one == account || two == account
        }
        return mine[choice % mine.count]
    }
    /// Another account, the one a group change names.
    var other: AccountID {
        let others = DifferentialRun.accounts.filter { $0 != account }
        return others[choice % others.count]
    }
}

/// One of an account's two connected devices: `a` and `a'`.
struct DifferentialDevice: Hashable, Sendable, CustomStringConvertible {
    let account: AccountID
    let index: Int
    var description: String { index == 0 ? account.rawValue : account.rawValue + "'" }
    var id: DeviceID { DeviceID(rawValue: index == 0 ? "phone" : "tablet") }
}
