// Courier — Apache-2.0
import ArgumentParser
import CourierHarness
import CourierWire
import Foundation
import GRDB
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `group --members M --messages K`: one group of M members, K messages asking for read receipts, every member
/// acks every message.
///
/// The owner stays connected and sends. The other members are offline accounts, and each acks with one conversation
/// read (which acks every message that asked: K acks). With `--acks rest` (the default) the app's backend reads for
/// 1,000 of them per `POST /v1/conversations/{id}/reads`, `--workers` requests at a time; with `--acks connections`
/// `--workers` connections at a time each connect as one member, ack and close. Half-way, the owner measures count
/// and list queries (the read and unread lists are then both half full).
///
/// With `--acks online`, `--online N` members stay connected from before the first message (they connect once the
/// group exists), as people in a busy group do: the owner sends `--batch` messages at a time, and after each batch every online member reads the conversation
/// once, all at the same moment, on its own connection (one read acks the batch). The owner's count and list queries
/// run while those reads are under way. Acks come from the online members only.
enum GroupScenario {
    /// How the members' acks reach the server.
    enum AckPath: String, CaseIterable, ExpressibleByArgument, Sendable {
        case rest, connections, online
    }

    static func run(
        _ context: BenchContext,
        members: Int,
        messages: Int,
        acks path: AckPath,
        workers: Int,
        online: Int = 0,
        batch: Int = 1
    ) async throws -> Report {
        let owner: AccountID = "owner"
        let others = (1..<members).map { AccountID(rawValue: "m\($0)") }
        let group = ConversationID.group("bench")
        let progress = Progress(label: "group")

        // Accounts, 1,000 per REST request.
        let registerStart = nowMilliseconds()
        let everyone = [owner] + others
        for batch in stride(from: 0, to: members, by: 1000).map({ everyone[$0..<min($0 + 1000, members)] }) {
            try await context.server.register(Array(batch))
            try context.checkDeadline("registering accounts")
        }
        progress.say("registered \(members) accounts in \(seconds(since: registerStart)) s")

        let readers = path == .online ? min(online, others.count) : others.count
        let counts = ReadCounts(messages: messages, target: readers)
        let onEvent: @Sendable (Int, ServerEvent) -> Void = { _, event in
            if case .groupReceipts(let payload) = event { counts.record(payload.updates) }
        }
        return try await withConnectedClients(context, accounts: [owner], onEvent: onEvent) { clients in
            let sender = clients[0]
            let createStart = nowMilliseconds()
            try await createGroup("bench", by: sender, members: others, context)
            let createSeconds = seconds(since: createStart)
            progress.say("created the group of \(members) in \(createSeconds) s")

            if path == .online {
                // The online members connect once the group exists (each change of a group notifies every member
                // online, the list of accounts it names included).
                let connectStart = nowMilliseconds()
                let rounds = try await withConnectedClients(context, accounts: Array(others.prefix(readers)), parallelism: 64) {
                    progress.say("connected \(readers) members in \(seconds(since: connectStart)) s")
                    return try await readOnline(sender, $0, group, messages: messages, batch: batch, context, progress)
                }
                try await counts.waitUntilComplete(deadline: context.deadline)
                var report = rounds.report(context, members: members, messages: messages, batch: batch, readers: readers, counts: counts)
                report["create_group_sec"] = .number(createSeconds)
                return report
            }

            // K messages asking for read receipts.
            let bytesBeforeSend = context.server.databaseBytes
            var sent: [WireMessage] = []
            for index in 0..<messages { sent.append(try await sendAsking(index, from: sender, to: group)) }
            let bytesAfterSend = context.server.databaseBytes
            let last = sent.last?.seq ?? .zero

            // Every member acks, through `workers` short-lived connections; queries half-way.
            let cpuBefore = context.server.cpuSeconds
            let switchesBefore = context.server.contextSwitches
            let half = others.count / 2
            var ackSeconds = 0.0
            var start = nowMilliseconds()
            _ = try await ackAll(Array(others[..<half]), group, last, path, workers, context, progress)
            ackSeconds += seconds(since: start)

            let countQueries = try await measureCounts(sender, group, sent, queries: 200)
            let listPages = try await measureLists(sender, group, sent[sent.count / 2].id, pages: 100)

            start = nowMilliseconds()
            let lastAckSent = try await ackAll(Array(others[half...]), group, last, path, workers, context, progress)
            ackSeconds += seconds(since: start)
            let cpu = context.server.cpuSeconds - cpuBefore
            let switches = context.server.contextSwitches - switchesBefore
            // The sender's event that brings the last message's count to M − 1.
            try await counts.waitUntilComplete(deadline: context.deadline)
            let complete = counts.completedAt ?? lastAckSent
            let bytesAfterAcks = context.server.databaseBytes

            let acks = (members - 1) * messages
            var report = Report()
            report["scenario"] = .string("group")
            report["members"] = .integer(members)
            report["messages"] = .integer(messages)
            report["acks"] = .integer(acks)
            report["ack_path"] = .string(path.rawValue)
            report["ack_requests"] = .integer(
                path == .rest ? (half + 999) / 1000 + (others.count - half + 999) / 1000 : members - 1
            )
            report["acks_per_sec"] = .number((Double(acks) / ackSeconds).rounded())
            report["ack_connections_per_sec"] = .number((Double(members - 1) / ackSeconds).rounded())
            report["last_ack_to_sender_count_ms"] = .number(max(0, complete - lastAckSent))
            report["sender_receipt_events"] = .integer(counts.events)
            report["count_query_ms"] = .latency(countQueries)
            report["list_page_ms"] = .latency(listPages)
            report["create_group_sec"] = .number(createSeconds)
            if let before = bytesBeforeSend, let afterSend = bytesAfterSend, let afterAcks = bytesAfterAcks {
                report["db_bytes_per_message"] = .number(Double(afterAcks - before) / Double(messages))
                report["db_bytes_per_message_sent"] = .number(Double(afterSend - before) / Double(messages))
            } else {
                report["db_bytes_per_message"] = .null
            }
            report["server_cpu_sec_per_1k_acks"] = .number(cpu / Double(acks) * 1000)
            report["context_switches_per_ack"] = .number((Double(switches) / Double(acks) * 100).rounded() / 100)
            report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
            return report
        }
    }

    /// Every account acks with one conversation read up to `last`, `workers` requests or connections at a time.
    /// Returns when the last ack was sent.
    static func ackAll(
        _ accounts: [AccountID],
        _ group: ConversationID,
        _ last: Seq,
        _ path: AckPath,
        _ workers: Int,
        _ context: BenchContext,
        _ progress: Progress
    ) async throws -> Double {
        switch path {
        case .rest: try await readThroughREST(accounts, group, last, workers, context, progress)
        case .connections: try await ackThroughConnections(accounts, group, last, workers, context, progress)
        case .online: preconditionFailure("online members read through readOnline")
        }
    }

    /// The group `id`, made by `owner`: created with its first 1,000 members, then 1,000 more per change.
    static func createGroup(
        _ id: GroupID,
        by owner: ProtocolClient,
        members: [AccountID],
        _ context: BenchContext
    ) async throws {
        let batches = stride(from: 0, to: members.count, by: 1000).map {
            Array(members[$0..<min($0 + 1000, members.count)])
        }
        let create = CreateGroupRequest(group: id, clientID: ClientMessageID(rawValue: "create-\(id)"), members: batches.first ?? [])
        try expectAck(try await owner.request { .createGroup($0, create) })
        for (index, batch) in batches.enumerated().dropFirst() {
            let change = GroupChangeRequest(
                conversation: .group(id),
                clientID: ClientMessageID(rawValue: "add-\(id)-\(index)"),
                action: .add,
                accounts: batch
            )
            try expectAck(try await owner.request { .groupChange($0, change) })
            try context.checkDeadline("creating the group")
        }
    }

    /// Group message number `index`, asking for read receipts; its ack's message.
    static func sendAsking(_ index: Int, from sender: ProtocolClient, to group: ConversationID) async throws -> WireMessage {
        let request = SendRequest(
            conversation: group,
            clientID: ClientMessageID(rawValue: "g\(index)"),
            body: "group message \(index)",
            needsReadReceipt: true
        )
        guard case .ack(_, .send(let ack)) = try await sender.request({ .send($0, request) }) else {
            throw HarnessError.refused("send")
        }
        return ack.message
    }

    /// The app's backend reads for 1,000 accounts per request.
    static func readThroughREST(
        _ accounts: [AccountID],
        _ group: ConversationID,
        _ last: Seq,
        _ workers: Int,
        _ context: BenchContext,
        _ progress: Progress
    ) async throws -> Double {
        let batches = stride(from: 0, to: accounts.count, by: 1000).map {
            Array(accounts[$0..<min($0 + 1000, accounts.count)])
        }
        let url = URL(string: context.server.httpURL + "/v1/conversations/\(group.rawValue)/reads")!
        return try await forEach(batches, workers: workers, context, progress) { batch, sent in
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.setValue("Bearer \(context.server.secret)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(AppReads(accounts: batch, seq: last))
            sent()
            let (_, response) = try await URLSession.shared.data(for: request)
            guard (response as? HTTPURLResponse)?.statusCode == 204 else {
                throw HarnessError.refused("POST /v1/conversations/{id}/reads")
            }
            return batch.count
        }
    }

    struct AppReads: Encodable {
        let accounts: [AccountID]
        let seq: Seq
    }

    /// Each account connects, acks with one conversation read up to `last`, and disconnects.
    static func ackThroughConnections(
        _ accounts: [AccountID],
        _ group: ConversationID,
        _ last: Seq,
        _ workers: Int,
        _ context: BenchContext,
        _ progress: Progress
    ) async throws -> Double {
        try await forEach(accounts, workers: workers, context, progress) { account, sent in
            let token = try await context.token(account)
            let client = ProtocolClient()
            try await client.run(url: context.server.url, token: token, account: account, device: "bench") {
                sent()
                try expectAck(try await client.request { .read($0, ReadRequest(conversation: group, seq: last)) })
            }
            return 1
        }
    }

    /// Runs `ack` for every item, `workers` at a time, with progress every 10,000 members. `ack` calls `sent` when
    /// its request leaves and returns how many members it acked for. Returns when the last request left.
    static func forEach<Item: Sendable>(
        _ items: [Item],
        workers: Int,
        _ context: BenchContext,
        _ progress: Progress,
        ack: @escaping @Sendable (Item, _ sent: @escaping @Sendable () -> Void) async throws -> Int
    ) async throws -> Double {
        let next = Counter()
        let done = Counter()
        let lastSent = Latest()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for _ in 0..<workers {
                tasks.addTask {
                    while true {
                        let index = next.increment() - 1
                        guard index < items.count else { return }
                        let acked = try await ack(items[index]) { lastSent.raise(to: nowMilliseconds()) }
                        let before = done.add(acked) - acked
                        if (before + acked) / 10_000 > before / 10_000 {
                            progress.say("\(before + acked) members acked")
                        }
                        try context.checkDeadline("acking")
                    }
                }
            }
            try await tasks.waitForAll()
        }
        return lastSent.value
    }

    /// Read counts of one message (the sender's view), one query at a time.
    static func measureCounts(
        _ sender: ProtocolClient,
        _ group: ConversationID,
        _ sent: [WireMessage],
        queries: Int
    ) async throws -> Samples {
        var samples = Samples()
        for index in 0..<queries {
            let request = ReceiptCountsRequest(conversation: group, messageIDs: [sent[index % sent.count].id])
            let t0 = nowMilliseconds()
            try expectAck(try await sender.request { .receiptCounts($0, request) })
            samples.add(nowMilliseconds() - t0)
        }
        return samples
    }

    /// 100-entry pages of the read and the unread list of one message, following the cursors.
    static func measureLists(
        _ sender: ProtocolClient,
        _ group: ConversationID,
        _ message: MessageID,
        pages: Int
    ) async throws -> Samples {
        var samples = Samples()
        for list in [ReceiptListKind.read, .unread] {
            var cursor: String?
            for _ in 0..<pages {
                let request = ReceiptListRequest(
                    conversation: group,
                    messageID: message,
                    list: list,
                    cursor: cursor,
                    limit: 100
                )
                let t0 = nowMilliseconds()
                guard case .ack(_, .receiptList(let page)) = try await sender.request({ .receiptList($0, request) })
                else { throw HarnessError.refused("receiptList") }
                samples.add(nowMilliseconds() - t0)
                cursor = page.nextCursor
                if cursor == nil { break }
            }
        }
        return samples
    }

    static func seconds(since start: Double) -> Double { ((nowMilliseconds() - start) / 10).rounded() / 100 }
}

func expectAck(_ frame: ServerFrame) throws {
    guard case .ack = frame else { throw HarnessError.refused("\(frame)") }
}

/// The sender's read counts as its `groupReceipts` events report them, and when every message reached `target`.
final class ReadCounts: Sendable {
    private struct State {
        var counts: [MessageID: Int] = [:]
        var completedAt: Double?
        var events = 0
    }
    private let state = Mutex(State())
    private let messages: Int
    private let target: Int
    private let done = AsyncStream.makeStream(of: Void.self)

    init(messages: Int, target: Int) {
        self.messages = messages
        self.target = target
    }

    func record(_ updates: [GroupReceiptUpdate]) {
        let now = nowMilliseconds()
        let completed = state.withLock { state -> Bool in
            state.events += 1
            for update in updates {
                state.counts[update.messageID] = max(state.counts[update.messageID] ?? 0, update.readCount)
            }
            guard state.completedAt == nil, state.counts.count == messages,
                state.counts.values.allSatisfy({ $0 >= target })
            else { return false }
            state.completedAt = now
            return true
        }
        if completed { done.continuation.finish() }
    }

    var completedAt: Double? { state.withLock { $0.completedAt } }

    /// The `groupReceipts` events the sender received.
    var events: Int { state.withLock { $0.events } }

    /// Returns once every message's count reached the target, or throws at the deadline.
    func waitUntilComplete(deadline: Double) async throws {
        let wait = Task { for await _ in done.stream {} }
        let timeout = Task {
            try await Task.sleep(for: .milliseconds(max(0, deadline - nowMilliseconds())))
            done.continuation.finish()
        }
        await wait.value
        timeout.cancel()
        guard completedAt != nil else { throw HarnessError.timedOut("waiting for the sender's counts") }
    }
}

/// Progress lines on stderr (stdout carries the report).
struct Progress: Sendable {
    let label: String
    func say(_ line: String) { FileHandle.standardError.write(Data("[\(label)] \(line)\n".utf8)) }
}

/// A shared counter for worker tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    /// Adds one and returns the new value.
    func increment() -> Int { add(1) }
    /// Adds `count` and returns the new value.
    func add(_ count: Int) -> Int { value.wrappingAdd(count, ordering: .relaxed).newValue }
    var current: Int { value.load(ordering: .relaxed) }
}

/// The latest of several times, shared between worker tasks.
final class Latest: Sendable {
    private let time = Mutex<Double>(0)
    func raise(to value: Double) { time.withLock { $0 = max($0, value) } }
    var value: Double { time.withLock { $0 } }
}
