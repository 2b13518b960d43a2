// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import Foundation
import Testing

extension PostgresProcessTests {
    /// A restore cannot fork history. A PostgreSQL database dumped (`pg_dump -Fc`), written to
    /// further, and restored (`pg_restore`) with nothing else done: the restored database's identity is not the one the
    /// devices' cursors name (ADR 0044), so a device that held the messages sent after the dump starts over and ends
    /// with exactly the server's history — the new messages that took the lost seqs included, none of the lost ones
    /// kept.
    @Suite("A PostgreSQL database restored under Courier", .serialized, .timeLimit(.minutes(5)))
    struct PostgresRestoreTests {
        @Test(
            "pg_dump, more messages, pg_restore with no other step: a device that held the lost messages ends with exactly the server's history",
            .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
        )
        func restoreWithoutAnyOtherStep() async throws {
            // PostgreSQL servers of the tests take ports in 10,000–20,000; the nodes that restart on theirs, 20,000–32,000.
            let database = try PostgresServer(port: Int.random(in: 10_000..<20_000))
            defer { database.remove() }
            try database.tool("createdb", ["courier"])
            let dump = NSTemporaryDirectory() + "courier-dump-" + UUID().uuidString
            defer { try? FileManager.default.removeItem(atPath: dump) }
            let launch = ServerProcess.Launch(
                binary: Binaries.courierServer,
                environment: ["COURIER_POSTGRES_URL": database.url(database: "courier")],
                logLevel: "info"
            )
            let first = try ServerProcess(launch, secret: Binaries.secret)
            try await first.register(["alice", "bob"])
            let alice = try await first.app("alice")
            let bob = try await first.app("bob")
            let direct = ConversationID.direct("alice", "bob")
            for index in 0..<5 { try await alice.send("before-\(index)", to: direct).stored() }
            #expect(try await bob.holds(5, in: direct))
            try database.tool("pg_dump", ["-Fc", "-f", dump, "courier"])
            // Sent after the dump, and held by both devices: the restore loses them.
            for index in 0..<3 { try await alice.send("lost-\(index)", to: direct).stored() }
            #expect(try await bob.holds(8, in: direct))
            // A cursor of a device that holds nothing past the dump: only the database's identity can refuse it.
            let handedOut = try await first.withClient("bob", device: "tablet") { client in
                try await client.request { .sync($0, SyncRequest(cursors: [:])) }
            }
            guard case .ack(_, .sync(let synced)) = handedOut, let cursor = synced.since else {
                Issue.record("no cursor handed out: \(handedOut)")
                return
            }
            #expect(first.stop() == 0)

            // The restore as an operator types it: a new database from the dump, nothing else.
            try database.tool("dropdb", ["courier"])
            try database.tool("createdb", ["courier"])
            try database.tool("pg_restore", ["--no-owner", "-d", "courier", dump])
            var again = launch
            again.port = first.port
            let second = try ServerProcess(again, secret: Binaries.secret)
            defer { _ = second.stop() }
            #expect(try await second.history(direct).count == 5)
            let resumed = try await second.withClient("bob", device: "tablet") { client in
                try await client.request { .sync($0, SyncRequest(cursors: [:], since: cursor)) }
            }
            guard case .error(_, let refusal) = resumed else {
                Issue.record("the restored database honoured a cursor of the one dumped: \(resumed)")
                return
            }
            #expect(refusal.code == .syncCursorInvalid)

            // New messages take the seqs of the lost ones; both devices follow the restored history exactly.
            var ids: [String] = []
            for index in 0..<3 { ids.append(try await alice.send("after-restore-\(index)", to: direct).stored().id.rawValue) }
            let sent = ids
            let converged = try await second.converges([alice, bob], in: direct) { $0.suffix(3) == sent[...] }
            let server = try await second.history(direct)
            let received = try await bob.messages(in: direct, limit: 500)
            #expect(converged, "server \(server.count), bob \(received.map(\.body))")
            #expect(server.count == 8)
            #expect(!received.contains { $0.body.hasPrefix("lost-") })
            await alice.disconnect()
            await bob.disconnect()
        }
    }
}
