// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `reactions --members M --reactors R`: a reaction burst on one message of a group of M (ADR 0055). The owner
/// sends one message and stays connected; R members react to it through the app's backend (`POST
/// /v1/conversations/{id}/reactions`, one reaction per request, `--workers` at a time, a tenth of them with a second
/// reaction), while the owner asks for the message's counts one request after another and its device gets every
/// `reaction` event. Measures reactions per second, the owner's count query, and the server's CPU per reaction.
enum ReactionScenario {
    static func run(_ context: BenchContext, members: Int, reactors: Int, workers: Int) async throws -> Report {
        let owner: AccountID = "owner"
        let others = (1..<members).map { AccountID(rawValue: "m\($0)") }
        let group = ConversationID.group("reactions")
        let progress = Progress(label: "reactions")
        for batch in stride(from: 0, to: members, by: 1000).map({ ([owner] + others)[$0..<min($0 + 1000, members)] }) {
            try await context.server.register(Array(batch))
            try context.checkDeadline("registering accounts")
        }
        let events = Counter()
        let onEvent: @Sendable (Int, ServerEvent) -> Void = { _, event in
            if case .reaction = event { _ = events.add(1) }
        }
        return try await withConnectedClients(context, accounts: [owner], onEvent: onEvent) { clients in
            let sender = clients[0]
            try await GroupScenario.createGroup("reactions", by: sender, members: others, context)
            progress.say("created the group of \(members)")
            let send = SendRequest(conversation: group, clientID: "the-message", body: "react to me")
            guard case .ack(_, .send(let ack)) = try await sender.request({ .send($0, send) }) else {
                throw HarnessError.refused("send")
            }
            let message = ack.message.id

            // The burst: each reactor one 👍, every tenth a 🎉 too; the owner's count queries meanwhile.
            var writes: [Reaction] = []
            for index in 0..<reactors {
                writes.append(Reaction(account: others[index], reaction: "👍"))
                if index % 10 == 0 { writes.append(Reaction(account: others[index], reaction: "🎉")) }
            }
            let cpuBefore = context.server.cpuSeconds
            let switchesBefore = context.server.contextSwitches
            let start = nowMilliseconds()
            let finished = Counter()
            async let queries = measureCounts(sender, group, message, until: finished)
            let url = URL(string: context.server.httpURL + "/v1/conversations/\(group.rawValue)/reactions")!
            _ = try await GroupScenario.forEach(writes, workers: workers, context, progress) {
                reaction, sent in
                var request = URLRequest(url: url)
                request.httpMethod = "POST"
                request.setValue("Bearer \(context.server.secret)", forHTTPHeaderField: "Authorization")
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = try JSONEncoder().encode(Body(account: reaction.account, messageId: message, reaction: reaction.reaction))
                sent()
                let (_, response) = try await URLSession.shared.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                    throw HarnessError.refused("POST /v1/conversations/{id}/reactions")
                }
                return 1
            }
            let burstSeconds = (nowMilliseconds() - start) / 1000
            _ = finished.add(1)
            let countSamples = try await queries
            let cpu = context.server.cpuSeconds - cpuBefore
            let switches = context.server.contextSwitches - switchesBefore
            // Every reaction reached the owner's device, or the run's deadline passed.
            while events.current < writes.count, nowMilliseconds() < context.deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let final = ReactionsRequest(conversation: group, messageIDs: [message])
            guard case .ack(_, .reactions(let counts)) = try await sender.request({ .reactions($0, final) }) else {
                throw HarnessError.refused("reactions")
            }
            let total = counts.messages.first?.counts.reduce(0) { $0 + $1.count } ?? 0
            guard total == writes.count else { throw HarnessError.refused("counted \(total) of \(writes.count) reactions") }

            var report = Report()
            report["scenario"] = .string("reactions")
            report["members"] = .integer(members)
            report["reactions"] = .integer(writes.count)
            report["workers"] = .integer(workers)
            report["reactions_per_sec"] = .number((Double(writes.count) / burstSeconds).rounded())
            report["count_query_ms_during_burst"] = .latency(countSamples)
            report["count_queries"] = .integer(countSamples.values.count)
            report["owner_reaction_events"] = .integer(events.current)
            report["server_cpu_ms_per_reaction"] = .number((cpu / Double(writes.count) * 1_000_000).rounded() / 1000)
            report["context_switches_per_reaction"] = .number((Double(switches) / Double(writes.count) * 10).rounded() / 10)
            report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
            return report
        }
    }

    struct Reaction: Sendable {
        let account: AccountID
        let reaction: String
    }

    struct Body: Encodable {
        let account: AccountID
        let messageId: MessageID
        let reaction: String
    }

    /// The owner's `reactions` query for the message, one after another until `finished`.
    static func measureCounts(
        _ sender: ProtocolClient,
        _ group: ConversationID,
        _ message: MessageID,
        until finished: Counter
    ) async throws -> Samples {
        var samples = Samples()
        let request = ReactionsRequest(conversation: group, messageIDs: [message])
        while finished.current == 0 {
            let t0 = nowMilliseconds()
            try expectAck(try await sender.request { .reactions($0, request) })
            samples.add(nowMilliseconds() - t0)
        }
        return samples
    }
}
