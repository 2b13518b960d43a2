// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation

/// `connections --count C`: C idle, authenticated WebSocket connections; memory per connection. With `--sync`, each
/// device then syncs once (as the SDK does after connecting) before it idles.
enum ConnectionsScenario {
    static func run(_ context: BenchContext, count: Int, sync: Bool = false) async throws -> Report {
        let accounts = (0..<count).map { AccountID(rawValue: "c\($0)") }
        let rssBefore = context.server.rssKiB
        let start = nowMilliseconds()
        return try await withConnectedClients(context, accounts: accounts, parallelism: 64) { clients in
            let seconds = (nowMilliseconds() - start) / 1000
            if sync {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, client) in clients.enumerated() {
                        if index >= 64 { try await group.next() }
                        group.addTask { try expectAck(try await client.request { .sync($0, SyncRequest(cursors: [:], limit: 100)) }) }
                    }
                    try await group.waitForAll()
                }
            }
            let rssAfter = context.server.rssKiB
            var report = Report()
            report["scenario"] = .string("connections")
            report["connections"] = .integer(count)
            report["synced"] = .string(sync ? "yes" : "no")
            report["server_rss_mib"] = .integer(rssAfter / 1024)
            report["rss_kib_per_connection"] = .number(Double(rssAfter - rssBefore) / Double(count))
            report["connect_per_sec"] = .number((Double(count) / seconds).rounded())
            return report
        }
    }
}

/// `sync --messages N`: a device reconnects after missing N messages and pages `sync` until caught up.
enum SyncScenario {
    static func run(_ context: BenchContext, messages: Int) async throws -> Report {
        let conversation = ConversationID.direct("sync-reader", "sync-writer")
        // Register the reader, then fill its conversation while it is away (4 pipelined writers).
        try await withConnectedClients(context, accounts: ["sync-reader"]) { _ in }
        let writers = 4
        try await withConnectedClients(context, accounts: Array(repeating: "sync-writer", count: writers)) { clients in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (writer, client) in clients.enumerated() {
                    group.addTask {
                        for index in stride(from: writer, to: messages, by: writers) {
                            let request = SendRequest(
                                conversation: conversation,
                                clientID: ClientMessageID(rawValue: "m\(index)"),
                                body: "missed message \(index)"
                            )
                            let reply = try await client.request { .send($0, request) }
                            guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try context.checkDeadline("filling the conversation")
        }
        // The reader comes back and catches up.
        return try await withConnectedClients(context, accounts: ["sync-reader"]) { clients in
            let start = nowMilliseconds()
            var cursor = Seq.zero
            var received = 0
            while true {
                let reply = try await clients[0].request { .sync($0, SyncRequest(cursors: [conversation: cursor])) }
                guard case .ack(_, .sync(let ack)) = reply else { throw HarnessError.refused("\(reply)") }
                received += ack.messages.count
                cursor = ack.messages.last?.seq ?? cursor
                if !ack.hasMore { break }
                try context.checkDeadline("catching up")
            }
            let milliseconds = nowMilliseconds() - start
            var report = Report()
            report["scenario"] = .string("sync")
            report["messages"] = .integer(received)
            report["catch_up_ms"] = .number(milliseconds)
            report["messages_per_sec"] = .number((Double(received) / milliseconds * 1000).rounded())
            return report
        }
    }
}
