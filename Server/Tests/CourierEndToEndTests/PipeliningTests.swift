// Courier — Apache-2.0
import CourierHarness
import CourierSDK
@testable import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Pipelining: a device sends many requests without waiting for their acks, and what it sees stays what it
/// saw one at a time — acks in request order, seqs in the order it sent, and no receipt of a message before the ack of
/// its send — while the server works on them together. Seen on the wire of real connections, on every backend.
@Suite("Pipelined requests", .timeLimit(.minutes(5)))
struct PipeliningTests {
    /// The value of an unlabelled sample in the server's Prometheus exposition.
    static func metric(_ server: TestServer, _ name: String) async throws -> Double {
        let (_, body) = try await server.restResponse("GET", "/metrics")
        let line = String(decoding: body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return Double(line?.split(separator: " ").last ?? "0") ?? 0
    }

    static func withServer(
        on backend: ServerBackend,
        in folder: TemporaryFolder,
        _ body: @escaping @Sendable (TestServer) async throws -> Void
    ) async throws {
        switch backend {
        case .sqlite: try await withTestServer(location: .file(folder.path + "/courier.sqlite"), body)
        case .postgres: try await withTestServer(on: .postgres, body)
        }
    }

    @Test("acks in request order, seqs in send order, receipts never before the send's ack", arguments: ServerBackend.available)
    func orderingUnderPipelining(backend: ServerBackend) async throws {
        // SQLite on a file: its commits wait for the disk, as in production, so requests worked on together share them.
        let folder = try TemporaryFolder()
        try await Self.withServer(on: backend, in: folder) { server in
            try await server.register("alice", "bob", "carol")
            let toBob = ConversationID.direct("alice", "bob")
            let toCarol = ConversationID.direct("alice", "carol")
            try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                try await server.withRawConnection { alice in
                    _ = try await alice.connect(as: "alice", server: server)
                    // Bob reads every message the moment its event reaches him, without waiting for his own acks,
                    // until all 20 reads are acknowledged (a refused one is a failure here, not a read that never
                    // reaches Alice).
                    let reader = Task {
                        var (reads, readAcks) = (0, 0)
                        while readAcks < 20, let frame = try await bob.next() {
                            switch frame {
                            case .event(.message(let event)) where reads < 20:
                                reads += 1
                                let read = ReadRequest(conversation: toBob, seq: event.message.seq)
                                try await bob.send(.read(RequestID(rawValue: "r\(reads)"), read))
                            case .ack(_, .read):
                                readAcks += 1
                            case .error(let id, let error):
                                Issue.record("bob's read \(String(describing: id)) refused: \(error)")
                                return false
                            default:
                                continue
                            }
                        }
                        return readAcks == 20
                    }
                    // Alice sends 40 requests at once: 20 messages to Bob and 19 to Carol, interleaved, and a ping
                    // (about no single conversation) in the middle.
                    var sent: [(id: RequestID, conversation: ConversationID?)] = []
                    for index in 0..<40 {
                        let id = RequestID(rawValue: "\(index)")
                        if index == 21 {
                            try await alice.send(.ping(id))
                            sent.append((id, nil))
                            continue
                        }
                        let conversation = index.isMultiple(of: 2) ? toBob : toCarol
                        let request = SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "c\(index)"), body: "m\(index)")
                        try await alice.send(.send(id, request))
                        sent.append((id, conversation))
                    }
                    var acks: [RequestID] = []
                    var acked: [ConversationID: [Seq]] = [:]
                    var readBeforeAck: [Seq] = []
                    var lastRead = Seq.zero
                    // Alice's acks first; then, once Bob's last read is acknowledged, its event must reach her.
                    var bobDone = false
                    while acks.count < sent.count || lastRead < 20, let frame = try await alice.next() {
                        switch frame {
                        case .ack(let id, .send(let ack)):
                            acks.append(id)
                            acked[ack.message.conversation, default: []].append(ack.message.seq)
                        case .ack(let id, _):
                            acks.append(id)
                        case .error(let id, let error):
                            Issue.record("request \(String(describing: id)) refused: \(error)")
                            return
                        case .event(.read(let event)) where event.conversation == toBob:
                            // Bob read up to here: Alice must hold the acks of all her messages up to it.
                            if !(acked[toBob] ?? []).contains(event.watermark.seq) { readBeforeAck.append(event.watermark.seq) }
                            lastRead = max(lastRead, event.watermark.seq)
                        default:
                            continue
                        }
                        if acks.count == sent.count, !bobDone {
                            guard try await reader.value else { return }
                            bobDone = true
                        }
                    }
                    if !bobDone { _ = try await reader.value }
                    #expect(acks == sent.map(\.id), "acks in request order")
                    #expect(acked[toBob] == (1...20).map { Seq($0) }, "seqs in the order sent")
                    #expect(acked[toCarol] == (1...19).map { Seq($0) })
                    #expect(readBeforeAck.isEmpty, "receipts of messages whose send was not yet acknowledged")
                }
            }
        }
    }

    @Test(
        "one device's sends share commits, into different conversations or into one (its seqs in the order sent)",
        arguments: [false, true]
    )
    func sendsShareCommits(oneConversation: Bool) async throws {
        let folder = try TemporaryFolder()
        // On a file, as in production: a commit waits for the disk, and what arrives meanwhile joins the next one.
        try await withTestServer(location: .file(folder.path + "/courier.sqlite")) { server in
            let peers = (0..<30).map { AccountID(rawValue: oneConversation ? "bob" : "peer\($0)") }
            try await server.register("alice")
            for peer in Set(peers) { try await server.register(peer) }
            let commitsBefore = try await Self.metric(server, "courier_commit_operations_count")
            let sendsIn = #"courier_frames_in_total{type="send"}"#
            let sendsBefore = try await Self.metric(server, sendsIn)
            try await server.withRawConnection { alice in
                _ = try await alice.connect(as: "alice", server: server)
                // A commit under way while the sends arrive (a write held on the store's thread): all 30 are in the
                // server together, however fast this machine delivers them.
                let store = try #require(server.store as? SQLiteStore)
                let gate = ThreadGate()
                let holder = Task { try await store.write { _ in gate.wait() } }
                while !gate.isWaiting { await Task.yield() }
                for (index, peer) in peers.enumerated() {
                    let request = SendRequest(conversation: .direct("alice", peer), clientID: ClientMessageID(rawValue: "c\(index)"), body: "m\(index)")
                    try await alice.send(.send(RequestID(rawValue: "\(index)"), request))
                }
                while try await Self.metric(server, sendsIn) - sendsBefore < 30 { await Task.yield() }
                gate.open()
                try await holder.value
                var acks: [RequestID] = []
                var seqs: [Seq] = []
                while acks.count < peers.count, let frame = try await alice.next() {
                    guard case .ack(let id, .send(let ack)) = frame else { continue }
                    acks.append(id)
                    seqs.append(ack.message.seq)
                    #expect(ack.message.body == "m\(acks.count - 1)")
                }
                #expect(acks == (0..<30).map { RequestID(rawValue: "\($0)") })
                #expect(seqs == (0..<30).map { Seq(oneConversation ? $0 + 1 : 1) }, "seqs in the order sent")
            }
            // One at a time, 30 sends are 30 commits (each waits for the one before); worked on together, far fewer
            // (the connect's and the held write's commits are among them).
            let commits = try await Self.metric(server, "courier_commit_operations_count") - commitsBefore
            #expect(commits <= 5, "30 sends in \(commits) commits")
        }
    }

    @Test("a device that reads each message as it arrives: its reads share commits, answered in order, and the sender learns the last")
    func readsShareCommits() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(location: .file(folder.path + "/courier.sqlite")) { server in
            try await server.register("alice", "bob")
            let conversation = ConversationID.direct("alice", "bob")
            try await server.withRawConnection { alice in
                _ = try await alice.connect(as: "alice", server: server)
                var ids: [MessageID] = []
                for index in 0..<30 {
                    let request = SendRequest(conversation: conversation, clientID: ClientMessageID(rawValue: "c\(index)"), body: "m\(index)")
                    try await alice.send(.send(RequestID(rawValue: "s\(index)"), request))
                }
                while ids.count < 30, let frame = try await alice.next() {
                    if case .ack(_, .send(let ack)) = frame { ids.append(ack.message.id) }
                }
                let sent = ids
                let commitsBefore = try await Self.metric(server, "courier_commit_operations_count")
                let readsIn = #"courier_frames_in_total{type="read"}"#
                let readsBefore = try await Self.metric(server, readsIn)
                try await server.withRawConnection { bob in
                    _ = try await bob.connect(as: "bob", server: server)
                    // A commit under way while the reads arrive (a write held on the store's thread): bob's 30 reads,
                    // one message each as a client that marks each message read sends them, are in the server
                    // together. One after the other, each would wait for the commit of the one before.
                    let store = try #require(server.store as? SQLiteStore)
                    let gate = ThreadGate()
                    let holder = Task { try await store.write { _ in gate.wait() } }
                    while !gate.isWaiting { await Task.yield() }
                    for (index, id) in sent.enumerated() {
                        let read = ReadRequest(conversation: conversation, messageIDs: [id])
                        try await bob.send(.read(RequestID(rawValue: "r\(index)"), read))
                    }
                    while try await Self.metric(server, readsIn) - readsBefore < 30 { await Task.yield() }
                    gate.open()
                    try await holder.value
                    var answers: [(id: RequestID, state: ReadState)] = []
                    while answers.count < 30, let frame = try await bob.next() {
                        switch frame {
                        case .ack(let id, .read(let state)): answers.append((id, state))
                        case .error(let id, let error): Issue.record("read \(String(describing: id)) refused: \(error)")
                        default: continue
                        }
                    }
                    #expect(answers.map(\.id) == (0..<30).map { RequestID(rawValue: "r\($0)") }, "answers in request order")
                    let watermarks = answers.map(\.state.watermark.seq)
                    #expect(watermarks == watermarks.sorted(), "no answer goes back: \(watermarks)")
                    #expect(answers.last?.state.watermark.seq == 30 && answers.last?.state.unreadCount == 0)
                    #expect(answers.allSatisfy { $0.state.readSeqs.isEmpty }, "read in order: nothing left above the watermark")
                }
                let commits = try await Self.metric(server, "courier_commit_operations_count") - commitsBefore
                #expect(commits <= 5, "30 reads in \(commits) commits")
                // The sender learns bob read up to the last message.
                var seen = Seq.zero
                while seen < 30, let frame = try await alice.next() {
                    if case .event(.read(let event)) = frame { seen = max(seen, event.watermark.seq) }
                }
                #expect(seen == 30)
            }
        }
    }

    @Test("the SDK sends its outbox with a window: several sends on the wire before the first ack, seqs in the order sent")
    func sdkPipelinesItsOutbox() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            let alice = try server.client(device: "phone") {
                $0.serverURL = URL(string: "ws://127.0.0.1:\(proxy.port)/v1/ws")!
                // What is checked is order, not speed: a loaded test machine may take longer than the default.
                $0.requestTimeout = .seconds(60)
            }
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let conversation = ConversationID.direct("alice", "bob")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 { group.addTask { _ = try await alice.send("m\(index)", to: conversation).stored() } }
                try await group.waitForAll()
            }
            // What went over the wire, in the order the proxy relayed it.
            var sent: [String] = []
            var firstAckAfter: Int?
            var acked: [(clientID: String, seq: Int)] = []
            for (fromServer, text) in proxy.transcript {
                guard let frame = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { continue }
                if !fromServer, frame["type"] as? String == "send", let data = frame["data"] as? [String: Any] {
                    sent.append(data["clientId"] as? String ?? "")
                } else if fromServer, frame["request"] as? String == "send",
                    let message = (frame["data"] as? [String: Any])?["message"] as? [String: Any]
                {
                    firstAckAfter = firstAckAfter ?? sent.count
                    acked.append((message["clientId"] as? String ?? "", message["seq"] as? Int ?? 0))
                }
            }
            #expect(sent.count == 20)
            #expect((firstAckAfter ?? 0) > 1, "the first ack came after \(firstAckAfter ?? 0) sends were on the wire")
            #expect(acked.map(\.clientID) == sent, "acks in the order sent")
            #expect(acked.map(\.seq) == Array(1...20), "seqs in the order sent")
            await alice.disconnect()
            await proxy.shutdown()
        }
    }
}
