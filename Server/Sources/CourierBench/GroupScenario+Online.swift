// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierGateway
import CourierWire

/// `group --acks online`: members that stay connected read once per batch of messages.
extension GroupScenario {
    /// Where the owner's queries run in the bench (see ``readOnline(_:_:_:messages:batch:_:_:)``), a thread of their own.
    static let ownerThread = ThreadExecutor(name: "bench-owner")

    /// What `--acks online` measured.
    struct OnlineRounds {
        var count = 0
        var ackSeconds = 0.0
        var lastAck = 0.0
        /// The server's CPU time from the first batch's send to the last batch's reads.
        var cpuSeconds = 0.0
        var contextSwitches = 0
        var reads = Samples()
        var counts = Samples()
        var lists = Samples()

        func report(
            _ context: BenchContext,
            members: Int,
            messages: Int,
            batch: Int,
            readers: Int,
            counts: ReadCounts
        ) -> Report {
            let acks = readers * messages
            let reads = readers * count
            var report = Report()
            report["scenario"] = .string("group")
            report["members"] = .integer(members)
            report["messages"] = .integer(messages)
            report["ack_path"] = .string(AckPath.online.rawValue)
            report["online_members"] = .integer(readers)
            report["batch"] = .integer(batch)
            report["acks"] = .integer(acks)
            report["reads"] = .integer(reads)
            report["acks_per_sec"] = .number((Double(acks) / ackSeconds).rounded())
            report["reads_per_sec"] = .number((Double(reads) / ackSeconds).rounded())
            report["read_ms"] = .latency(self.reads)
            report["last_ack_to_sender_count_ms"] = .number(max(0, (counts.completedAt ?? lastAck) - lastAck))
            report["sender_receipt_events"] = .integer(counts.events)
            report["count_query_ms_during_acks"] = .latency(self.counts)
            report["list_page_ms_during_acks"] = .latency(lists)
            report["server_cpu_sec_per_1k_acks"] = .number(cpuSeconds / Double(acks) * 1000)
            report["context_switches_per_ack"] = .number((Double(contextSwitches) / Double(acks) * 100).rounded() / 100)
            report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
            return report
        }
    }

    /// Sends `messages` in batches of `batch`; after each, every reader reads up to the batch's last message at the
    /// same moment, while the sender queries the batch's read counts and pages its read and unread lists.
    static func readOnline(
        _ sender: ProtocolClient,
        _ readers: [ProtocolClient],
        _ group: ConversationID,
        messages: Int,
        batch: Int,
        _ context: BenchContext,
        _ progress: Progress
    ) async throws -> OnlineRounds {
        var rounds = OnlineRounds()
        var sentCount = 0
        let cpuStart = context.server.cpuSeconds
        let switchesStart = context.server.contextSwitches
        while sentCount < messages {
            var sent: [WireMessage] = []
            for _ in 0..<min(batch, messages - sentCount) {
                sent.append(try await sendAsking(sentCount, from: sender, to: group))
                sentCount += 1
            }
            let batchSent = sent
            let last = batchSent.last!.seq
            let readsDone = Counter()
            let start = nowMilliseconds()
            let (reads, queries) = try await withThrowingTaskGroup(of: (Samples, Samples, Samples).self) { tasks in
                // The owner's queries while the reads go on: a count, then a page of a list, and again. On a thread of
                // their own, as a device is a machine of its own: otherwise the time measured is mostly this
                // process's 10,000 readers' tasks queued before the owner's on the bench's own two cores.
                tasks.addTask(executorPreference: Self.ownerThread) {
                    var counts = Samples()
                    var lists = Samples()
                    var index = 0
                    while readsDone.add(0) == 0 {
                        let message = batchSent[index % batchSent.count]
                        var t0 = nowMilliseconds()
                        try expectAck(
                            try await sender.request {
                                .receiptCounts($0, ReceiptCountsRequest(conversation: group, messageIDs: [message.id]))
                            }
                        )
                        counts.add(nowMilliseconds() - t0)
                        let list: ReceiptListKind = index % 2 == 0 ? .read : .unread
                        t0 = nowMilliseconds()
                        try expectAck(
                            try await sender.request {
                                .receiptList($0, ReceiptListRequest(conversation: group, messageID: message.id, list: list, limit: 100))
                            }
                        )
                        lists.add(nowMilliseconds() - t0)
                        index += 1
                    }
                    return (Samples(), counts, lists)
                }
                tasks.addTask {
                    let samples = try await withThrowingTaskGroup(of: Double.self) { members in
                        for reader in readers {
                            members.addTask {
                                let t0 = nowMilliseconds()
                                try expectAck(try await reader.request { .read($0, ReadRequest(conversation: group, seq: last)) })
                                return nowMilliseconds() - t0
                            }
                        }
                        var samples = Samples()
                        for try await value in members { samples.add(value) }
                        return samples
                    }
                    _ = readsDone.increment()
                    return (samples, Samples(), Samples())
                }
                var reads = Samples()
                var queries = (Samples(), Samples())
                for try await (read, counts, lists) in tasks {
                    reads.values += read.values
                    queries.0.values += counts.values
                    queries.1.values += lists.values
                }
                return (reads, queries)
            }
            rounds.lastAck = nowMilliseconds()
            rounds.ackSeconds += (rounds.lastAck - start) / 1000
            rounds.count += 1
            rounds.reads.values += reads.values
            rounds.counts.values += queries.0.values
            rounds.lists.values += queries.1.values
            progress.say("\(sentCount) messages sent, \(readers.count) reads each batch")
            try context.checkDeadline("reading online")
        }
        rounds.cpuSeconds = context.server.cpuSeconds - cpuStart
        rounds.contextSwitches = context.server.contextSwitches - switchesStart
        return rounds
    }
}
