// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension PostgresProcessTests {
    /// A node whose PostgreSQL stops answers fast and recovers by itself. A real server process on a
    /// PostgreSQL server of the test's own, stopped (`pg_ctl stop -m immediate`) and started again under it: while it
    /// is down a device's send gets `store.unavailable` and a REST send 503 with `Retry-After`, each within 3 s, and
    /// readiness turns 503 within 3 s; once it is back the node is ready within 5 s, and nothing fails after it says
    /// so.
    @Suite("A database that stops under a running node", .serialized, .timeLimit(.minutes(5)))
    struct DatabaseOutageTests {
        func restSend(_ server: ServerProcess, _ clientID: String) async throws -> RESTAnswer {
            try await server.call(
                "POST",
                "/v1/conversations/\(ConversationID.direct("alice", "bob"))/messages",
                json: #"{"from":"alice","clientId":"\#(clientID)","type":"text","body":"hello"}"#
            )
        }

        /// How long `body` took, and what it returned.
        func timed<T>(_ body: () async throws -> T) async rethrows -> (T, Duration) {
            let started = ContinuousClock.now
            let value = try await body()
            return (value, ContinuousClock.now - started)
        }

        @Test(
            "PostgreSQL stopped: sends answered store.unavailable within 3 s, readiness 503 within 3 s; started again: ready within 5 s, then every send succeeds",
            .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
        )
        func outageAndRecovery() async throws {
            let database = try PostgresServer(port: Int.random(in: 10_000..<20_000))
            defer { database.remove() }
            let server = try ServerProcess(
                ServerProcess.Launch(
                    binary: Binaries.courierServer,
                    environment: ["COURIER_POSTGRES_URL": database.url],
                    logLevel: "info"
                ),
                secret: Binaries.secret
            )
            defer { _ = server.stop() }
            try await server.register(["alice", "bob"])
            #expect(try await restSend(server, "before").status == 200)
            // Bob's app, on the SDK: its send while the database is down stays queued and goes out once it is back.
            let bob = try CourierClient(
                configuration: .init(
                    serverURL: URL(string: server.url)!,
                    store: .inMemory,
                    requestTimeout: .seconds(60),
                    reconnectBackoff: Backoff(initial: .milliseconds(100), maximum: .seconds(1)),
                    deviceID: "bob-phone"
                )
            )
            try await bob.connect(account: "bob", token: try await Binaries.token(for: "bob"))

            let device = ProtocolClient()
            let token = try await Binaries.token(for: "alice")
            try await device.run(url: server.url, token: token, account: "alice", device: "phone") {
                let conversation = ConversationID.direct("alice", "bob")
                func send(_ clientID: String) async throws -> ServerFrame {
                    try await device.request {
                        .send($0, SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: clientID), body: clientID))
                    }
                }
                guard case .ack = try await send("online") else {
                    Issue.record("the first send was refused")
                    return
                }

                // What an operator's alerts watch, from the first scrape.
                #expect(try await server.metric("courier_store_reachable") == 1)
                #expect(try await server.metric("courier_store_connection_timeouts_total") == 0)
                #expect(try await server.metric("courier_store_connections_waiting") == 0)
                #expect(try await server.metric("courier_store_connections_in_use") != nil)
                try database.crash()
                let queued = Task { try await bob.send("queued while down", to: conversation).stored() }
                // The device's send: an error frame with the retryable code, in time; the connection stays up.
                let (frame, frameTook) = try await timed { try await send("down-1") }
                guard case .error(_, let error) = frame else {
                    Issue.record("a send while the database is down was answered \(frame)")
                    return
                }
                #expect(error.code == .storeUnavailable)
                #expect(frameTook < .seconds(3), "answered after \(frameTook)")
                // The REST send: 503, Retry-After, the code.
                let (rest, restTook) = try await timed { try await restSend(server, "down-2") }
                #expect(rest.status == 503 && rest.code == "store.unavailable", "\(rest.status) \(rest.code ?? "")")
                #expect(rest.header("Retry-After") == "1")
                #expect(restTook < .seconds(3), "answered after \(restTook)")
                let (ready, readyTook) = try await timed { try await server.call("GET", "/health/ready") }
                #expect(ready.status == 503 && readyTook < .seconds(3), "\(ready.status) after \(readyTook)")
                #expect(server.isAlive)
                #expect(try await server.metric("courier_store_reachable") == 0)
                #expect(try await server.metric("courier_store_connection_timeouts_total") ?? 0 >= 1)

                // Back: ready within 5 s of the database accepting connections, and from then on nothing fails.
                try database.start()
                let back = ContinuousClock.now
                while try await server.call("GET", "/health/ready").status != 200 {
                    guard ContinuousClock.now - back < .seconds(5) else {
                        Issue.record("not ready 5 s after the database came back")
                        return
                    }
                }
                let recovered = ContinuousClock.now - back
                #expect(try await server.metric("courier_store_reachable") == 1)
                print("database outage: device send answered in \(frameTook), REST send in \(restTook), readiness in \(readyTook); ready \(recovered) after the database came back")
                for index in 0..<20 {
                    let answer = try await restSend(server, "after-\(index)")
                    #expect(answer.status == 200, "REST send \(index) after ready: \(answer.status) \(answer.code ?? "")")
                    let frame = try await send("after-device-\(index)")
                    guard case .ack = frame else {
                        Issue.record("device send \(index) after ready: \(frame)")
                        return
                    }
                }
                // The sends answered store.unavailable were not written; a retry with the same client id is a new send.
                guard case .ack(_, .send(let retried)) = try await send("down-1") else {
                    Issue.record("the retry of the refused send failed")
                    return
                }
                #expect(retried.message.body == "down-1")
                // Bob's queued send went out once the database was back, once.
                let sent = try await queued.value
                #expect(sent.body == "queued while down")
                let (status, body) = try await server.rest("GET", "/v1/conversations/\(conversation)/messages?account=bob&limit=1000")
                #expect(status == 200)
                struct Page: Decodable {
                    struct Entry: Decodable { let body: String }
                    let messages: [Entry]
                }
                let bodies = try JSONDecoder().decode(Page.self, from: body).messages.map(\.body)
                #expect(bodies.filter { $0 == "queued while down" }.count == 1, "\(bodies)")
                #expect(!bodies.contains("down-2"), "a REST send answered 503 was not written")
            }
            await bob.disconnect()
        }
    }
}
