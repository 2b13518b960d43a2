// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
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
        let workload = CrashWorkload(nodes: nodes, quota: 2000, maxSeconds: 150, killEvery: 0.2...0.8)
        try await workload.prepare()
        let figures = try await workload.run()
        let problems = try await workload.verify()
        print("crash test (SQLite): \(figures)")
        #expect(problems.isEmpty, "\(problems.prefix(20))")
        #expect(figures.messages == 4 * 2000, "every sender's quota acknowledged in time")
        #expect(figures.kills >= 5, "enough kills to mean something")
        #expect(figures.reads >= 100, "readers kept reading through the kills")
    }

    @Test(
        "PostgreSQL with two nodes: kill -9 of either node and a database crash lose nothing",
        .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
    )
    func postgres() async throws {
        let database = try PostgresServer(port: Int.random(in: 40_000..<50_000))
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
