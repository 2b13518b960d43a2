// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Synchronization

/// `typing --devices D --group-size G --rounds R`: D connected devices in groups of G (each group made by its first
/// member); every device says it is typing R times, start and stop in turn, one request at a time, all devices at
/// once. Measures the server's CPU and context switches per indicator, and from each request to the moment each
/// other member's device has the event (ADR 0050: nothing is stored, so this is the gateway and the fan-out alone).
enum TypingScenario {
    static func run(_ context: BenchContext, devices: Int, groupSize: Int, rounds: Int) async throws -> Report {
        let accounts = (0..<devices).map { AccountID(rawValue: "t\($0)") }
        var grouped = stride(from: 0, to: devices, by: groupSize).map { Array(accounts[$0..<min($0 + groupSize, devices)]) }
        // A last group of one would have nobody to tell: its member joins the group before.
        if grouped.count > 1, grouped[grouped.count - 1].count == 1 { grouped[grouped.count - 2] += grouped.removeLast() }
        let groups = grouped
        let groupOf = Dictionary(uniqueKeysWithValues: groups.enumerated().flatMap { index, members in
            members.map { ($0, index) }
        })
        // When each typist sent each of its indicators, and how many of a typist's events each device had: a device
        // gets one typist's events in the order sent, so its n-th is the typist's n-th indicator.
        let sentAt = SentTimes()
        let seen = Mutex<[String: Int]>([:])
        let latency = Mutex(Samples())
        let arrivals = AsyncStream.makeStream(of: Void.self)
        let onEvent: @Sendable (Int, ServerEvent) -> Void = { receiver, event in
            guard case .typing(let typing) = event else { return }
            let now = nowMilliseconds()
            let round = seen.withLock { seen -> Int in
                let key = "\(receiver)|\(typing.account)"
                defer { seen[key, default: 0] += 1 }
                return seen[key, default: 0]
            }
            // Starts and stops alternate: an event that is not the round's direction was matched wrongly (one lost).
            if typing.active == (round % 2 == 0),
                let sent = sentAt.times.withLock({ $0[typing.account].flatMap { round < $0.count ? $0[round] : nil } })
            {
                latency.withLock { $0.add(now - sent) }
            }
            arrivals.continuation.yield()
        }
        return try await withConnectedClients(context, accounts: accounts, parallelism: 64, onEvent: onEvent) { clients in
            // The groups, each made by its first member.
            for (index, members) in groups.enumerated() {
                let request = CreateGroupRequest(
                    group: GroupID(rawValue: "typing-\(index)"),
                    clientID: ClientMessageID(rawValue: "typing-group-\(index)"),
                    members: Array(members.dropFirst())
                )
                let creator = clients[index * groupSize]  // the first member (groups start every groupSize)
                try expectAck(try await creator.request { .createGroup($0, request) })
                try context.checkDeadline("creating the groups")
            }
            let expected = groups.reduce(0) { $0 + $1.count * ($1.count - 1) } * rounds
            let cpuBefore = context.server.cpuSeconds
            let switchesBefore = context.server.contextSwitches
            let start = nowMilliseconds()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, client) in clients.enumerated() {
                    let conversation = ConversationID.group(GroupID(rawValue: "typing-\(groupOf[accounts[index]] ?? 0)"))
                    let account = accounts[index]
                    group.addTask {
                        for round in 0..<rounds {
                            let active = round % 2 == 0
                            sentAt.times.withLock { $0[account, default: []].append(nowMilliseconds()) }
                            let request = TypingRequest(conversation: conversation, active: active ? nil : false)
                            let reply = try await client.request { .typing($0, request) }
                            guard case .ack(_, .typing(let ack)) = reply else { throw HarnessError.refused("\(reply)") }
                            // A server showing no typing (--typing-indicators false) would leave the wait below empty.
                            guard ack.shown else { throw HarnessError.refused("typing not shown: \(reply)") }
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Every event has arrived, or the run's deadline has passed.
            let deadline = context.deadline
            let received = try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    var received = 0
                    for await _ in arrivals.stream {
                        received += 1
                        if received == expected { break }
                    }
                    return received
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(max(0, deadline - nowMilliseconds())))
                    throw HarnessError.timedOut("waiting for typing events")
                }
                defer { group.cancelAll() }
                return try await group.next() ?? 0
            }
            let seconds = (nowMilliseconds() - start) / 1000
            let indicators = devices * rounds
            let cpu = context.server.cpuSeconds - cpuBefore
            let switches = context.server.contextSwitches - switchesBefore
            var report = Report()
            report["scenario"] = .string("typing")
            report["devices"] = .integer(devices)
            report["group_size"] = .integer(groupSize)
            report["indicators"] = .integer(indicators)
            report["events"] = .integer(received)
            report["indicators_per_sec"] = .number((Double(indicators) / seconds).rounded())
            report["indicator_to_event_ms"] = .latency(latency.withLock { $0 })
            report["server_cpu_ms_per_indicator"] = .number((cpu / Double(indicators) * 1_000_000).rounded() / 1000)
            report["context_switches_per_indicator"] = .number((Double(switches) / Double(indicators) * 10).rounded() / 10)
            report["server_rss_mib"] = .integer(context.server.rssKiB / 1024)
            return report
        }
    }
}

/// When each typist sent its indicators, in order (a class: the senders' tasks and the event handler share it).
final class SentTimes: Sendable {
    let times = Mutex<[AccountID: [Double]]>([:])
}
