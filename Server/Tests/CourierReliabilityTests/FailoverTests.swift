// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import Foundation
import Testing

extension PostgresProcessTests {
    /// Failover with nothing lost. A primary and a synchronous streaming standby (Debian's PostgreSQL
    /// on loopback, `pg_basebackup -R`), two nodes given both hosts (`target_session_attrs=read-write`, ADR 0045). The
    /// primary is killed with SIGKILL while a device sends, the standby promoted: both nodes serve again by themselves
    /// within 10 s, every message whose send was acknowledged is in the promoted database, and the devices end with
    /// exactly its history (the promotion is a new timeline: their cursors are refused and they start over, ADR 0044).
    @Suite("A PostgreSQL primary that dies under two nodes", .serialized, .timeLimit(.minutes(5)))
    struct FailoverTests {
        func restSend(_ server: ServerProcess, _ clientID: String) async throws -> (RESTAnswer, id: String?) {
            let answer = try await server.call(
                "POST",
                "/v1/conversations/\(ConversationID.direct("alice", "bob"))/messages",
                json: #"{"from":"alice","clientId":"\#(clientID)","type":"text","body":"\#(clientID)"}"#
            )
            let ack = try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            let id = (ack?["message"] as? [String: Any])?["id"] as? String
            return (answer, answer.status == 200 ? id : nil)
        }

        @Test(
            "kill -9 the primary, promote the synchronous standby: both nodes serve within 10 s, no acknowledged message is lost, devices end with the promoted history",
            .enabled(if: PostgresServer.isAvailable, "needs PostgreSQL installed (.ci/postgres.sh installs it)")
        )
        func failover() async throws {
            // Below 20,000 with the other tests' PostgreSQL servers (the nodes that restart on theirs use 20,000–32,000).
            let port = Int.random(in: 10_000..<19_999)
            let primary = try PostgresServer(port: port, settings: ["synchronous_standby_names=walreceiver"])
            defer { primary.remove() }
            let standby = try PostgresServer(standbyOf: primary, port: port + 1)
            defer { standby.remove() }
            let url = "postgres://postgres@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/postgres"
                + "?target_session_attrs=read-write"
            let launch = ServerProcess.Launch(
                binary: Binaries.courierServer,
                environment: ["COURIER_POSTGRES_URL": url],
                logLevel: "info"
            )
            let nodes = [try ServerProcess(launch, secret: Binaries.secret), try ServerProcess(launch, secret: Binaries.secret)]
            defer { for node in nodes { _ = node.stop() } }
            try await nodes[0].register(["alice", "bob"])
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await nodes[0].app("alice")
            let bob = try await nodes[1].app("bob")
            let acknowledged = Shared<[String]>([])
            let promotion = Shared<ContinuousClock.Instant?>(nil)
            let sentAfterPromotion = Shared(0)

            // A device that sends one message after another, as fast as they are acknowledged, through the failover
            // (300 in all: a conversation's history is read back in one page).
            let sender = Task {
                for index in 0..<300 {
                    guard let sent = try? await alice.send("device-\(index)", to: direct).stored() else { continue }
                    acknowledged.withLock { $0.append(sent.id.rawValue) }
                    if promotion.withLock({ $0 }) != nil { sentAfterPromotion.withLock { $0 += 1 } }
                }
            }
            #expect(try await ConnectionChaosTests.waitUntil(timeout: .seconds(30), woken: [alice.events()]) {
                acknowledged.withLock { $0.count } >= 20
            })

            try primary.kill9()
            try standby.promote()
            let promoted = ContinuousClock.now
            promotion.withLock { $0 = promoted }
            // Each node, by itself: the first REST send it answers 200 after the promotion.
            var recovery: [Duration] = []
            for (index, node) in nodes.enumerated() {
                var attempt = 0
                while true {
                    attempt += 1
                    let (answer, id) = try await restSend(node, "node\(index)-\(attempt)")
                    if let id {
                        acknowledged.withLock { $0.append(id) }
                        break
                    }
                    guard ContinuousClock.now - promoted < .seconds(10) else {
                        Issue.record("node \(index) still answers \(answer.status) \(answer.code ?? "") 10 s after the promotion")
                        return
                    }
                }
                recovery.append(ContinuousClock.now - promoted)
            }
            // The device goes on sending through the promoted primary, to its 300th message.
            _ = await sender.value
            #expect(sentAfterPromotion.withLock { $0 } >= 20)
            print("failover: nodes served again \(recovery) after the promotion; \(acknowledged.withLock { $0.count }) sends acknowledged")

            // Nothing acknowledged is lost, and both devices end with exactly the promoted database's history.
            let sent = Set(acknowledged.withLock { $0 })
            let history = try await nodes[1].history(direct)
            let lost = sent.subtracting(history)
            #expect(lost.isEmpty, "\(lost.count) acknowledged messages lost, e.g. \(lost.prefix(3))")
            #expect(sent.count >= 250, "\(sent.count) sends acknowledged")
            let converged = try await nodes[1].converges([alice, bob], in: direct)
            #expect(converged)
            await alice.disconnect()
            await bob.disconnect()
        }
    }
}
