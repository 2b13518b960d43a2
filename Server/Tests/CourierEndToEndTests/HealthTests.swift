// Courier — Apache-2.0
import CourierServer
import CourierWire
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import Testing

/// Liveness and readiness: ready means the store takes writes now and, on PostgreSQL, the node hears the
/// other nodes' changes.
@Suite("Health", .timeLimit(.minutes(5)))
struct HealthTests {
    struct Ready: Decodable, Equatable {
        let status: String
        let store: String
        let changeFeed: String
    }

    func ready(_ server: TestServer) async throws -> (Int, Ready) {
        let (status, body) = try await server.restResponse("GET", "/health/ready", secret: false)
        return (status, try JSONDecoder().decode(Ready.self, from: body))
    }

    @Test("a node whose database another process has locked for writing is live but not ready, until the lock goes")
    func sqliteWriteLock() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/courier.sqlite"
        try await withTestServer(location: .file(path)) { server in
            #expect(try await server.rest("GET", "/health/live", secret: false).status == 200)
            #expect(try await ready(server) == (200, Ready(status: "ready", store: "writable", changeFeed: "none")))

            // Another process (Python's sqlite3, as a backup tool or a shell would) takes the write lock and holds it.
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            holder.arguments = [
                "python3", "-c",
                """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1], isolation_level=None)
                db.execute("BEGIN IMMEDIATE")
                print("locked", flush=True)
                sys.stdin.read()
                db.execute("ROLLBACK")
                """,
                path,
            ]
            let input = Pipe()
            let output = Pipe()
            holder.standardInput = input
            holder.standardOutput = output
            try holder.run()
            let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            #expect(said.hasPrefix("locked"))

            #expect(try await ready(server) == (503, Ready(status: "unavailable", store: "unavailable", changeFeed: "none")))
            #expect(try await server.rest("GET", "/health/live", secret: false).status == 200)

            try input.fileHandleForWriting.close()
            holder.waitUntilExit()
            #expect(try await ready(server).0 == 200)
        }
    }

    @Test("a PostgreSQL node is ready once its change feed listens again", .enabled(if: ServerBackend.available.count > 1))
    func postgresFeed() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let node = try await TestNode.start(backend: .postgres(url: url))
            do {
                try await node.server.register("alice")
                #expect(try await PostgresTestDatabase.waitForListener(ofDatabaseAt: url))
                try await node.server.withRawConnection { connection in
                    _ = try await connection.connect(as: "alice", server: node.server)
                    #expect(try await PostgresTestDatabase.terminateListeners(ofDatabaseAt: url) == 1)
                    // The feed marks itself listening before it asks devices to sync: once this device is told, the
                    // node is ready.
                    while let frame = try await connection.next() {
                        if case .event(.syncRequired) = frame { break }
                    }
                }
                let (status, answer) = try await ready(node.server)
                #expect(status == 200 && answer == Ready(status: "ready", store: "writable", changeFeed: "listening"))
            } catch {
                await node.stop()
                throw error
            }
            await node.stop()
        }
    }
}
