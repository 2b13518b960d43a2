// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Synchronization

/// `direct --pairs P --messages N [--window W] [--read-each]`: P sender/recipient pairs send N messages in total, each
/// sender with up to W sends in flight (pipelining; 1: one at a time). Each recipient acknowledges delivery and then
/// reading, coalescing receipts while one is in flight as the SDK batches them; with `--read-each` it reads every
/// message as it arrives instead — one `read` naming that message, up to W in flight, no delivery receipt of its own
/// (a read implies delivered) — as XMPP clients send a displayed marker per message and an app marks each row it shows.
/// Beside the server's CPU it reports its context switches per message: how often the request path wakes a thread.
enum DirectScenario {
    static func run(
        _ context: BenchContext,
        pairs: Int,
        messages: Int,
        window: Int = 1,
        readEach: Bool = false
    ) async throws -> Report {
        let perPair = max(1, messages / pairs)
        let total = perPair * pairs
        let recipients = (0..<pairs).map { AccountID(rawValue: "r\($0)") }
        let senders = (0..<pairs).map { AccountID(rawValue: "s\($0)") }
        let deliveredAt = Mutex<[Int: [(Int64, Double)]]>([:])
        let readAt = Mutex<[Int: [(Int64, Double)]]>([:])
        let latest = (0..<pairs).map { _ in HighestSeq() }
        let signals = (0..<pairs).map { _ in AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }
        let arrivals = (0..<pairs).map { _ in AsyncStream.makeStream(of: MessageID.self) }

        let onRecipientEvent: @Sendable (Int, ServerEvent) -> Void = { index, event in
            if case .message(let payload) = event {
                if readEach { arrivals[index].continuation.yield(payload.message.id) }
                latest[index].raise(to: payload.message.seq.rawValue)
                signals[index].continuation.yield()
            }
        }
        let onSenderEvent: @Sendable (Int, ServerEvent) -> Void = { index, event in
            switch event {
            case .delivered(let payload):
                let now = nowMilliseconds()
                deliveredAt.withLock { $0[index, default: []].append((payload.watermark.seq.rawValue, now)) }
            case .read(let payload):
                let now = nowMilliseconds()
                // A read of one message above the watermark names it in `readSeqs`.
                let seq = max(payload.watermark.seq.rawValue, payload.readSeqs.map(\.rawValue).max() ?? 0)
                readAt.withLock { $0[index, default: []].append((seq, now)) }
            default:
                break
            }
        }
        return try await withConnectedClients(context, accounts: recipients, onEvent: onRecipientEvent) {
            recipientClients in
            try await withConnectedClients(context, accounts: senders, onEvent: onSenderEvent) { senderClients in
                let cpuBefore = context.server.cpuSeconds
                let switchesBefore = context.server.contextSwitches
                let start = nowMilliseconds()
                let sendTimes = try await withThrowingTaskGroup(of: (Int, [Double], [Double]).self) { group in
                    for pair in 0..<pairs {
                        let conversation = ConversationID.direct(senders[pair], recipients[pair])
                        group.addTask {
                            if readEach {
                                try await readEachLoop(
                                    recipientClients[pair],
                                    arrivals[pair].stream,
                                    conversation,
                                    perPair,
                                    window: window
                                )
                            } else {
                                try await receiptLoop(
                                    recipientClients[pair],
                                    signals[pair].stream,
                                    latest[pair],
                                    conversation,
                                    perPair
                                )
                            }
                            return (pair, [], [])
                        }
                        group.addTask {
                            let (sent, acked) = try await sendAll(
                                senderClients[pair],
                                conversation,
                                count: perPair,
                                window: window,
                                label: "p\(pair)"
                            )
                            return (pair, sent, acked)
                        }
                    }
                    var result: [Int: ([Double], [Double])] = [:]
                    for try await (pair, sent, acked) in group where !sent.isEmpty { result[pair] = (sent, acked) }
                    return result
                }
                let lastDelivered = deliveredAt.withLock { $0.values.compactMap { $0.last?.1 }.max() }
                let lastRead = readAt.withLock { $0.values.compactMap { $0.last?.1 }.max() }
                let end = max(lastDelivered ?? 0, lastRead ?? 0, start)
                let cpu = context.server.cpuSeconds - cpuBefore
                let switches = context.server.contextSwitches - switchesBefore
                var ackLatency = Samples()
                var deliveredLatency = Samples()
                var readLatency = Samples()
                for (pair, (sent, acked)) in sendTimes {
                    for latency in acked { ackLatency.add(latency) }
                    let delivered = deliveredAt.withLock { $0[pair] ?? [] }
                    let read = readAt.withLock { $0[pair] ?? [] }
                    for (offset, t0) in sent.enumerated() {
                        let seq = Int64(offset + 1)
                        if let mark = delivered.first(where: { $0.0 >= seq }) { deliveredLatency.add(mark.1 - t0) }
                        if let mark = read.first(where: { $0.0 >= seq }) { readLatency.add(mark.1 - t0) }
                    }
                }
                let seconds = (end - start) / 1000
                var report = Report()
                report["scenario"] = .string("direct")
                report["pairs"] = .integer(pairs)
                report["window"] = .integer(window)
                report["reads"] = .string(readEach ? "each" : "coalesced")
                report["messages"] = .integer(total)
                report["messages_per_sec"] = .number((Double(total) / seconds).rounded())
                report["send_to_ack_ms"] = .latency(ackLatency)
                report["send_to_delivered_ms"] = .latency(deliveredLatency)
                report["send_to_read_ms"] = .latency(readLatency)
                report["server_cpu_sec_per_1k"] = .number(cpu / Double(total) * 1000)
                report["context_switches_per_message"] = .number((Double(switches) / Double(total) * 10).rounded() / 10)
                report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
                report["duration_sec"] = .number(seconds)
                return report
            }
        }
    }

    /// Sends `count` messages in order with up to `window` unanswered at once: each is written as soon as the window
    /// allows, so seq `n` is the `n`th sent. Returns when each was sent, and how long its ack took, in send order.
    static func sendAll(
        _ client: ProtocolClient,
        _ conversation: ConversationID,
        count: Int,
        window: Int,
        label: String
    ) async throws -> (sent: [Double], acked: [Double]) {
        var sent = [Double](repeating: 0, count: count)
        var acked = [Double](repeating: 0, count: count)
        try await withThrowingTaskGroup(of: (Int, Double).self) { group in
            func settle(_ result: (Int, Double)) { acked[result.0] = result.1 - sent[result.0] }
            for index in 0..<count {
                if index >= window, let done = try await group.next() { settle(done) }
                let request = SendRequest(
                    conversation: conversation,
                    clientID: ClientMessageID(rawValue: "\(label)-\(index)"),
                    body: "message \(index) of \(label)"
                )
                sent[index] = nowMilliseconds()
                let pending = try await client.submit { .send($0, request) }
                group.addTask {
                    let reply = try await client.reply(to: pending)
                    guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                    return (index, nowMilliseconds())
                }
            }
            for try await done in group { settle(done) }
        }
        return (sent, acked)
    }

    /// Sends a delivery receipt and then a read receipt (a conversation read up to that seq) for the newest message
    /// whenever the previous pair is answered.
    static func receiptLoop(
        _ client: ProtocolClient,
        _ signal: AsyncStream<Void>,
        _ latest: HighestSeq,
        _ conversation: ConversationID,
        _ expected: Int
    ) async throws {
        var acknowledged: Int64 = 0
        for await _ in signal {
            let seq = latest.value
            guard seq > acknowledged else { continue }
            _ = try await client.request { .deliver($0, DeliverRequest(conversation: conversation, seq: Seq(seq))) }
            _ = try await client.request { .read($0, ReadRequest(conversation: conversation, seq: Seq(seq))) }
            acknowledged = seq
            if acknowledged >= Int64(expected) { return }
        }
    }
}

extension DirectScenario {
    /// Reads each message as it arrives, one `read` naming it, with up to `window` reads unanswered; returns once
    /// `expected` messages were read.
    static func readEachLoop(
        _ client: ProtocolClient,
        _ arrivals: AsyncStream<MessageID>,
        _ conversation: ConversationID,
        _ expected: Int,
        window: Int
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var read = 0
            for await id in arrivals {
                if read >= window { try await group.next() }
                let pending = try await client.submit { .read($0, ReadRequest(conversation: conversation, messageIDs: [id])) }
                group.addTask {
                    let reply = try await client.reply(to: pending)
                    guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                }
                read += 1
                if read >= expected { break }
            }
            try await group.waitForAll()
        }
    }
}

/// The highest seq seen, shared between an event callback and a receipt loop.
final class HighestSeq: Sendable {
    private let seq = Atomic<Int64>(0)
    func raise(to new: Int64) { seq.max(new, ordering: .relaxed) }
    var value: Int64 { seq.load(ordering: .relaxed) }
}
