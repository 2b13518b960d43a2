// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Synchronization

/// `recall --messages N`: P sender/recipient pairs first exchange N messages (not measured), then every sender
/// recalls its messages two-way, one request at a time, while the recipient is online. Measures from each recall
/// request to the moment the recipient receives its notice.
enum RecallScenario {
    static func run(_ context: BenchContext, messages: Int, pairs: Int) async throws -> Report {
        let perPair = max(1, messages / pairs)
        let total = perPair * pairs
        let senders = (0..<pairs).map { AccountID(rawValue: "rs\($0)") }
        let recipients = (0..<pairs).map { AccountID(rawValue: "rr\($0)") }
        let noticeAt = Mutex<[MessageID: Double]>([:])
        let notices = AsyncStream.makeStream(of: Void.self)

        let onRecipientEvent: @Sendable (Int, ServerEvent) -> Void = { _, event in
            guard case .message(let payload) = event, let recall = payload.message.recall else { return }
            let now = nowMilliseconds()
            noticeAt.withLock { $0[recall.messageID] = now }
            notices.continuation.yield()
        }
        return try await withConnectedClients(context, accounts: recipients, onEvent: onRecipientEvent) { _ in
            try await withConnectedClients(context, accounts: senders) { senderClients in
                // Phase 1, not measured: the messages to recall.
                let sent = try await withThrowingTaskGroup(of: (Int, [MessageID]).self) { group in
                    for pair in 0..<pairs {
                        group.addTask {
                            var ids: [MessageID] = []
                            for index in 0..<perPair {
                                let request = SendRequest(
                                    conversation: .direct(senders[pair], recipients[pair]),
                                    clientID: ClientMessageID(rawValue: "recall-\(pair)-\(index)"),
                                    body: "to be recalled: \(index) of pair \(pair)"
                                )
                                let reply = try await senderClients[pair].request { .send($0, request) }
                                guard case .ack(_, .send(let ack)) = reply else { throw HarnessError.refused("\(reply)") }
                                ids.append(ack.message.id)
                            }
                            try context.checkDeadline("sending the messages to recall")
                            return (pair, ids)
                        }
                    }
                    var sent: [Int: [MessageID]] = [:]
                    for try await (pair, ids) in group { sent[pair] = ids }
                    return sent
                }

                // Phase 2: the recalls.
                let cpuBefore = context.server.cpuSeconds
                let switchesBefore = context.server.contextSwitches
                let start = nowMilliseconds()
                let requestedAt = try await withThrowingTaskGroup(of: [(MessageID, Double)].self) { group in
                    for pair in 0..<pairs {
                        group.addTask {
                            var times: [(MessageID, Double)] = []
                            for id in sent[pair] ?? [] {
                                let t0 = nowMilliseconds()
                                let request = RecallRequest(
                                    conversation: .direct(senders[pair], recipients[pair]),
                                    messageID: id
                                )
                                let reply = try await senderClients[pair].request { .recall($0, request) }
                                guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                                times.append((id, t0))
                            }
                            return times
                        }
                    }
                    var all: [(MessageID, Double)] = []
                    for try await times in group { all += times }
                    return all
                }
                // Every notice has reached its recipient.
                var received = 0
                var iterator = notices.stream.makeAsyncIterator()
                while received < total {
                    guard await iterator.next() != nil else { throw HarnessError.closed }
                    received += 1
                    try context.checkDeadline("waiting for recall notices")
                }
                let arrivals = noticeAt.withLock { $0 }
                let end = arrivals.values.max() ?? start
                let cpu = context.server.cpuSeconds - cpuBefore
                let switches = context.server.contextSwitches - switchesBefore
                var latency = Samples()
                for (id, t0) in requestedAt { if let arrived = arrivals[id] { latency.add(arrived - t0) } }
                let seconds = (end - start) / 1000
                var report = Report()
                report["scenario"] = .string("recall")
                report["pairs"] = .integer(pairs)
                report["recalls"] = .integer(total)
                report["recalls_per_sec"] = .number((Double(total) / seconds).rounded())
                report["recall_to_notice_ms"] = .latency(latency)
                report["server_cpu_sec_per_1k"] = .number(cpu / Double(total) * 1000)
                report["context_switches_per_recall"] = .number((Double(switches) / Double(total) * 10).rounded() / 10)
                report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
                report["duration_sec"] = .number(seconds)
                return report
            }
        }
    }
}
