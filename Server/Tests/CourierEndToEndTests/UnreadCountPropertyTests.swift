// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import PropertyBased
import Testing

/// SPEC §7 "unread counts that are provably right": random programs of sends, reads of all three kinds, recalls,
/// devices going offline and coming back, run against a real server with real clients; after every step each online device
/// must agree with a simple model on every unread count and every message's read state.
@Suite("Unread counts and read state against a model", .timeLimit(.minutes(5)))
struct UnreadCountPropertyTests {
    @Test("random sends, reads, recalls, reconnects and devices agree with the model")
    func randomPrograms() async throws {
        // Each number is one step (see `Step`); shrinking removes and simplifies steps of a failing program.
        await propertyCheck(count: 12, input: Gen.int(in: 0...4095).array(of: 4...24)) { program in
            do {
                try await withTestServer { server in
                    let run = try await ProgramRun(server: server)
                    for number in program { try await run.perform(Step(number)) }
                }
            } catch {
                Issue.record("program \(program) failed: \(error)")
            }
        }
    }
}

/// One step of a program, decoded from a number.
enum Step: CustomStringConvertible {
    case send(from: Int)
    case readMessages(reader: Int, picks: [Int])
    case readConversation(reader: Int)
    case readUpToTime(reader: Int, pick: Int)
    case toggleDevice(Int)
    case recall(by: Int, pick: Int)

    init(_ number: Int) {
        let argument = number / 9
        let account = argument % 2
        switch number % 9 {
        case 8: self = .recall(by: account, pick: argument / 2)
        case 0, 1, 2: self = .send(from: account)
        case 3: self = .readMessages(reader: account, picks: [argument / 2])
        case 4: self = .readMessages(reader: account, picks: [argument / 2, argument / 7])
        case 5: self = .readConversation(reader: account)
        case 6: self = .readUpToTime(reader: account, pick: argument / 2)
        default: self = .toggleDevice(argument % 4)
        }
    }

    var description: String {
        switch self {
        case .send(let from): "send(\(from))"
        case .readMessages(let reader, let picks): "read(\(reader), \(picks))"
        case .readConversation(let reader): "readConversation(\(reader))"
        case .readUpToTime(let reader, let pick): "readUpToTime(\(reader), \(pick))"
        case .toggleDevice(let device): "toggle(\(device))"
        case .recall(let by, let pick): "recall(\(by), \(pick))"
        }
    }
}

/// The model: which messages exist, and which each account has read (every read is shared here, so what an account
/// has read is also what its peer sees).
struct ReadModel {
    struct Entry {
        let message: Message
        var sender: AccountID { message.sender }
    }
    var messages: [Entry] = []
    var read: [AccountID: Set<Seq>] = [:]
    /// Recalled messages: gone from every device.
    var recalled: [MessageID] = []
    /// The newest log entry (a message or a recall notice).
    var last: Seq = .zero

    func hasRead(_ account: AccountID, _ seq: Seq) -> Bool { read[account, default: []].contains(seq) }

    func unread(_ account: AccountID) -> Int {
        messages.filter { $0.sender != account && !hasRead(account, $0.message.seq) }.count
    }

    /// A message read ack of `seqs`: exactly those of others, whichever is the newest (ADR 0038).
    mutating func readMessages(_ account: AccountID, _ seqs: [Seq]) {
        let new = seqs.filter { seq in messages.contains { $0.message.seq == seq && $0.sender != account } }
        read[account, default: []].formUnion(new)
    }

    mutating func readUpTo(_ account: AccountID, _ seq: Seq) {
        read[account, default: []].formUnion(messages.map(\.message.seq).filter { $0 <= seq })
    }
}

/// Two accounts with two devices each, on one server; steps drive them and check them against the model.
final class ProgramRun: @unchecked Sendable {
    let server: TestServer
    let accounts: [AccountID] = ["alice", "bob"]
    let conversation = ConversationID.direct("alice", "bob")
    /// alice's two devices, then bob's.
    var devices: [(account: AccountID, client: CourierClient, events: AsyncStream<CourierEvent>, online: Bool)] = []
    var model = ReadModel()

    init(server: TestServer) async throws {
        self.server = server
        try await server.register("alice", "bob")
        for (index, account) in [accounts[0], accounts[0], accounts[1], accounts[1]].enumerated() {
            let client = try server.client(device: DeviceID(rawValue: "device\(index)"))
            let events = client.events()
            try await client.connect(account: account, token: try await server.token(for: account))
            devices.append((account, client, events, true))
        }
    }

    func perform(_ step: Step) async throws {
        switch step {
        case .send(let from):
            let device = try await onlineDevice(of: accounts[from])
            let message = try await device.send("m\(model.messages.count + 1)", to: conversation).stored()
            model.messages.append(.init(message: message))
            model.last = message.seq
        case .recall(let by, let pick):
            let account = accounts[by]
            let own = model.messages.filter { $0.sender == account }
            guard !own.isEmpty else { return }
            let target = own[pick % own.count].message
            let notice = try await onlineDevice(of: account).recall(target.id, in: conversation)
            model.messages.removeAll { $0.message.id == target.id }
            model.recalled.append(target.id)
            model.last = Seq(model.last.rawValue + 1)
            #expect(notice.messageID == target.id)
        case .readMessages(let reader, let picks):
            let account = accounts[reader]
            let others = model.messages.filter { $0.sender != account }
            guard !others.isEmpty else { return }
            let chosen = picks.map { others[$0 % others.count].message }
            try await onlineDevice(of: account).markRead(chosen.map(\.id), in: conversation)
            model.readMessages(account, chosen.map(\.seq))
        case .readConversation(let reader):
            let account = accounts[reader]
            try await onlineDevice(of: account).markConversationRead(conversation)
            model.readUpTo(account, model.last)
        case .readUpToTime(let reader, let pick):
            guard !model.messages.isEmpty else { return }
            let account = accounts[reader]
            let time = model.messages[pick % model.messages.count].message.time
            try await onlineDevice(of: account).markRead(upTo: time, in: conversation)
            let covered = model.messages.filter { $0.message.time <= time }.map(\.message.seq).max() ?? .zero
            model.readUpTo(account, covered)
        case .toggleDevice(let index):
            let device = devices[index]
            if device.online {
                await device.client.disconnect()
            } else {
                try await device.client.connect(
                    account: device.account,
                    token: try await server.token(for: device.account)
                )
            }
            devices[index].online.toggle()
        }
        for device in devices where device.online {
            try await settle(device.client, device.account, device.events, after: step)
        }
    }

    /// An online device of `account`, connecting its first one if none is.
    func onlineDevice(of account: AccountID) async throws -> CourierClient {
        if let device = devices.first(where: { $0.account == account && $0.online }) { return device.client }
        let index = devices.firstIndex { $0.account == account }!
        try await devices[index].client.connect(account: account, token: try await server.token(for: account))
        devices[index].online = true
        try await settle(devices[index].client, account, devices[index].events, after: nil)
        return devices[index].client
    }

    /// Waits, event by event (never by sleeping), until the device agrees with the model; fails after 10 s without
    /// a new event.
    func settle(
        _ client: CourierClient,
        _ account: AccountID,
        _ events: AsyncStream<CourierEvent>,
        after step: Step?
    )
        async throws
    {
        while let mismatch = try await mismatch(client, account) {
            do {
                _ = try await events.first(timeout: .seconds(10)) { _ in () }
            } catch {
                throw ModelMismatch(
                    description: "after \(step.map(String.init(describing:)) ?? "connect"), \(account): \(mismatch)"
                )
            }
        }
    }

    /// What the device gets wrong, or `nil`.
    func mismatch(_ client: CourierClient, _ account: AccountID) async throws -> String? {
        let unread = try await client.unreadCount(in: conversation)
        if unread != model.unread(account) { return "unread \(unread), model \(model.unread(account))" }
        if try await client.totalUnreadCount() != model.unread(account) { return "total unread differs" }
        let peer = accounts.first { $0 != account }!
        for id in model.recalled {
            // Gone, or in place as a bodiless `recalled` message.
            if let shown = try await client.message(id), shown.status != .recalled || !shown.body.isEmpty {
                return "recalled \(id) still shown as \(shown.status) “\(shown.body)”"
            }
        }
        for entry in model.messages {
            guard let message = try await client.message(entry.message.id) else {
                return "missing \(entry.message.seq)"
            }
            if entry.sender == account {
                let expected = model.hasRead(peer, entry.message.seq)
                if (message.status == .read) != expected { return "own \(entry.message.seq) status \(message.status)" }
            } else if message.isReadAcked != model.hasRead(account, entry.message.seq) {
                return "received \(entry.message.seq) isReadAcked \(message.isReadAcked)"
            }
        }
        return nil
    }
}

struct ModelMismatch: Error, CustomStringConvertible {
    let description: String
}
