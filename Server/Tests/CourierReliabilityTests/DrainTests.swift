// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Synchronization
import Testing

/// SIGTERM as an orchestrator sends it: a real `courier-server`, seen from outside — a device's socket, a
/// sender's acknowledgements, the process's exit, and what a restarted server holds.
@Suite("Draining a real server", .timeLimit(.minutes(5)))
struct DrainTests {
    @Test("SIGTERM: devices are told to reconnect elsewhere, every acknowledged message stays, and the drain is bounded")
    func drain() async throws {
        let folder = NSTemporaryDirectory() + "courier-drain-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let launch = ServerProcess.Launch(binary: Binaries.courierServer, arguments: ["--drain-seconds", "5"], folder: folder)
        let server = try ServerProcess(launch, secret: Binaries.secret)
        try await server.register(["alice", "bob"])

        // Bob's device, on a bare socket: it reads what the server sends and never answers a close frame, so only the
        // drain bound ends its session.
        let bob = try RawSocket(port: server.port)
        #expect(await bob.upgrade())
        let connect = ClientFrame.connect("c", ConnectRequest(token: try await Binaries.token(for: "bob"), account: "bob", device: "raw"))
        #expect(await bob.send(RawSocket.frame(opcode: 0x1, payload: Array(try JSONEncoder().encode(connect)))))
        #expect(await bob.receive(until: "\"ack\"", timeout: .seconds(10)).text.contains("\"ack\""))

        // Alice sends one message at a time until the connection ends; SIGTERM comes after the twentieth ack.
        let acked = Mutex<[MessageID]>([])
        let conversation = ConversationID.direct("alice", "bob")
        let (twenty, reached) = AsyncStream.makeStream(of: Void.self)
        let sender = Task {
            try? await server.withClient("alice") { client in
                for index in 1... {
                    let send = SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "m-\(index)"), body: "\(index)")
                    guard case .ack(_, .send(let ack)) = try await client.request({ .send($0, send) }) else { return }
                    let count = acked.withLock { $0.append(ack.message.id); return $0.count }
                    if count == 20 { reached.yield() }
                }
            }
        }
        for await _ in twenty { break }
        let signalled = ContinuousClock.now
        kill(server.pid, SIGTERM)

        // Bob gets a close frame (docs/protocol.md: 1001 `server.shuttingDown`): his SDK reconnects, to another node.
        var bytes: [UInt8] = []
        while RawSocket.closeCode(in: bytes) == nil {
            let (some, closed) = await bob.receiveSome(timeout: .seconds(20))
            bytes += some
            if closed || some.isEmpty { break }
        }
        let code = RawSocket.closeCode(in: bytes)
        #expect(code == 1001, "\(String(describing: code))")
        #expect(String(decoding: bytes, as: UTF8.self).contains("server.shuttingDown"))
        // The node still drains (Bob has not answered, and the bound is 5 s): it takes no new connection meanwhile.
        let draining = server.isAlive
        #expect(throws: (any Error).self, "a new connection is refused") { _ = try RawSocket(port: server.port) }
        #expect(draining && ContinuousClock.now - signalled < .seconds(5), "checked while the node drained")
        // Then the connection ends.
        #expect(await bob.receive(timeout: .seconds(20)).closed)
        // The process ends by itself within the drain bound (5 s), although Bob never answered the close frame: a
        // session otherwise waits 10 s for that answer.
        let status = await server.exited()
        let drained = ContinuousClock.now - signalled
        print("drain: the process exited \(drained) after SIGTERM")
        #expect(drained < .seconds(9), "\(drained)")
        #expect(status == 0, "a drain that ran out is still an orderly exit")
        _ = await sender.value

        // Every message Alice had an ack for is there after a restart.
        let restarted = try ServerProcess(ServerProcess.Launch(binary: Binaries.courierServer, folder: folder), secret: Binaries.secret)
        defer { restarted.stop() }
        let (answered, body) = try await restarted.rest("GET", "/v1/conversations/\(conversation)/messages?account=alice&limit=500")
        #expect(answered == 200)
        let stored = try JSONDecoder().decode(HistoryAck.self, from: body).messages.map(\.id)
        let sent = acked.withLock { $0 }
        #expect(sent.count >= 20 && Set(sent).isSubset(of: Set(stored)), "\(sent.count) acked, \(stored.count) stored")
    }
}
