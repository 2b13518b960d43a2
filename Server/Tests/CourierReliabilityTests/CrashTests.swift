// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// SPEC §9.1–9.5 under crashes: server processes are killed with SIGKILL (and PostgreSQL crashed) while four senders
/// pipeline 4–64 messages each on two direct conversations and a group, and three readers mark them read. Clients
/// resend what was not acknowledged, with the same client ids. Afterwards everything stored is compared with
/// everything acknowledged. Bounded: a fixed number of messages, and a time limit.
@Suite("Crashes during sends", .serialized, .timeLimit(.minutes(5)))
struct CrashTests {
    // Serialized: each test kills processes at a steady pace; two at once would halve each one's kills.

    @Test("SQLite: kill -9 every 0.2–0.8 s loses, duplicates and reorders nothing")
    func sqlite() async throws {
        let folder = try TemporaryFolder()
        let nodes = try Nodes([.init(binary: Binaries.courierServer, folder: folder.path + "/data")])
        defer { nodes.stopAll() }
        // Alone it takes about 10 s; in the full parallel suite on two cores, 60–125 s (the node's requests run on
        // one thread, the store's, which gets one thread's share of a contended machine; ADR 0037). The budget tells
        // a stall from a slow machine.
        let workload = CrashWorkload(nodes: nodes, quota: 2000, maxSeconds: 240, killEvery: 0.2...0.8)
        try await workload.prepare()
        let figures = try await workload.run()
        let problems = try await workload.verify()
        print("crash test (SQLite): \(figures)")
        #expect(problems.isEmpty, "\(problems.prefix(20))")
        #expect(figures.messages == 4 * 2000, "every sender's quota acknowledged in time")
        #expect(figures.kills >= 5, "enough kills to mean something")
        #expect(figures.reads >= 100, "readers kept reading through the kills")
    }

    @Test("SQLite with a webhook endpoint: every acknowledged message's event arrives, in order, none for another")
    func webhooksThroughKills() async throws {
        let folder = try TemporaryFolder()
        // The receiver listens on 127.0.0.1.
        let nodes = try Nodes([
            .init(binary: Binaries.courierServer, arguments: ["--webhook-allow-private", "true"], folder: folder.path + "/data")
        ])
        defer { nodes.stopAll() }
        let workload = CrashWorkload(nodes: nodes, quota: 400, maxSeconds: 120, killEvery: 0.2...0.8)
        try await workload.prepare()
        let port = try await freePort()
        let path = WebhookReceiver.uniquePath()
        let body = #"{"url":"http://127.0.0.1:\#(port)\#(path)","events":["message.created"]}"#
        let (status, created) = try await nodes.any.rest("POST", "/v1/webhooks", json: Data(body.utf8))
        #expect(status == 201)
        struct Created: Decodable { let secret: String }
        let receiver = try await WebhookReceiver(
            port: port,
            path: path,
            secrets: [try JSONDecoder().decode(Created.self, from: created).secret]
        )
        defer { receiver.stop() }

        let figures = try await workload.run()
        let problems = try await workload.verify()
        print("crash test with webhooks (SQLite): \(figures)")
        #expect(problems.isEmpty, "\(problems.prefix(20))")
        #expect(figures.messages == 4 * 400, "every sender's quota acknowledged in time")

        // Every acknowledged message's event arrives (at least once: a kill between a 2xx and its record repeats
        // it), and nothing else.
        var acked: [MessageID: (ConversationID, Seq)] = [:]
        for conversation in Set(CrashWorkload.senders.map(\.conversation)) {
            for entry in workload.ledger.acked(in: conversation).values { acked[entry.id] = (conversation, entry.seq) }
        }
        var seqs: [ConversationID: [Seq]] = [:]
        var seen: Set<MessageID> = []
        var strangers: [String] = []
        var received = 0
        var drainKills = 0
        while seen.count < acked.count, let delivery = await receiver.next() {
            // Kills while the backlog drains too: an attempt under way is repeated, in its place.
            received += 1
            if received % 150 == 0 {
                try nodes.killAndRestart(0)
                drainKills += 1
            }
            #expect(delivery.verified)
            guard let message = delivery.payload?.data.message else { continue }
            guard acked[message.id] != nil else {
                strangers.append("\(message.id) \(message.clientID)")
                continue
            }
            // A receiver de-duplicates on `webhook-id`: a kill between deliveries and their record resends them.
            guard seen.insert(message.id).inserted else { continue }
            seqs[message.conversation, default: []].append(message.seq)
        }
        #expect(seen.count == acked.count && strangers.isEmpty, "events for unacknowledged messages: \(strangers.prefix(5))")
        // In order per conversation, as a receiver that de-duplicates sees them: first arrivals never go back.
        for (conversation, arrived) in seqs {
            #expect(zip(arrived, arrived.dropFirst()).allSatisfy { $0 < $1 }, "\(conversation) out of order")
        }
        print("webhooks through kills: \(acked.count) messages, \(received) deliveries received, \(drainKills) kills while draining")
        #expect(drainKills >= 3)
    }

    @Test(
        "PostgreSQL with two nodes: kill -9 of either node and a database crash lose nothing",
        .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
    )
    func postgres() async throws {
        // Below the ephemeral range (32768+) and the nodes' ports (20000+): while the database is down after a
        // crash, an outgoing connection of this busy machine could otherwise take its port, and it could not start.
        let database = try PostgresServer(port: Int.random(in: 10_000..<20_000))
        defer { database.remove() }
        let launch = ServerProcess.Launch(
            binary: Binaries.courierServer,
            environment: ["COURIER_POSTGRES_URL": database.url]
        )
        let nodes = try Nodes([launch, launch])
        defer { nodes.stopAll() }
        var workload = CrashWorkload(nodes: nodes, quota: 500, maxSeconds: 120, killEvery: 0.3...1.0)
        workload.chaos = { kills in
            // Twice during the run: PostgreSQL stops at once (no checkpoint) and starts again.
            guard kills == 3 || kills == 7 else { return false }
            try database.crash()
            try database.start()
            return true
        }
        try await workload.prepare()
        let figures = try await workload.run()
        let problems = try await workload.verify()
        print("crash test (PostgreSQL, 2 nodes): \(figures)")
        #expect(problems.isEmpty, "\(problems.prefix(20))")
        #expect(figures.messages == 4 * 500)
        #expect(figures.kills >= 5 && figures.crashes == 2)
        #expect(figures.reads >= 100, "readers kept reading through the kills")
    }
}
