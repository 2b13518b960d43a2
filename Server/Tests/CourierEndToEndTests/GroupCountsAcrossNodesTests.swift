// Courier — Apache-2.0
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// A group's read counts reach the sender in an order that never goes back, whichever nodes the reads
/// came through (protocol.md: `readCount` never decreases). Two nodes on one PostgreSQL; the sender's device on node
/// A. Node A's fan-out of the other node's changes is held (the membership tests' hook) while a member reads through B
/// and then another through A, so the read through B reaches A's devices after the later one, alone — every run, not by
/// chance (runs when `COURIER_TEST_POSTGRES_URL` is set; `.ci/run` always sets it).
@Suite("A group's counts across nodes", .timeLimit(.minutes(3)), .enabled(if: PostgresTestDatabase.isAvailable))
struct GroupCountsAcrossNodesTests {
    @Test("reads through two nodes, one node's fan-out held: the sender's device gets counts that never go back")
    func countsNeverGoBack() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let gate = NotificationGate()
            try await withTwoNodes(on: url, configure: { $0.hooks.beforeFanOut = gate.pass }) { nodeA, nodeB in
                let readers: [AccountID] = ["r1", "r2", "r3", "r4"]
                for account in ["alice"] + readers { try await nodeA.server.register(account) }
                let members = readers.map { #""\#($0.rawValue)""# }.joined(separator: ",")
                let created = try await nodeA.server.rest(
                    "POST",
                    "/v1/groups",
                    body: #"{"group":"team","owner":"alice","members":[\#(members)]}"#
                )
                #expect(created.status == 201 || created.status == 200, "\(created)")
                let group = ConversationID.group("team")
                try await nodeA.server.withRawConnection { wire in
                    _ = try await wire.connect(as: "alice", server: nodeA.server, device: "wire")
                    guard
                        case .ack(_, .send(let sent))? = try await wire.request(
                            .send("m", SendRequest(conversation: group, clientID: "m", body: "read me", needsReadReceipt: true))
                        )
                    else {
                        Issue.record("the send was refused")
                        return
                    }
                    func read(_ reader: AccountID, through node: TestNode) async throws {
                        let answer = try await node.server.rest(
                            "POST",
                            "/v1/conversations/\(group)/reads",
                            body: #"{"accounts":["\#(reader.rawValue)"],"seq":\#(sent.message.seq.rawValue)}"#
                        )
                        #expect(answer.status == 204, "\(reader): \(answer)")
                    }
                    // Every update of the message, in the order the device gets them.
                    var counts: [Int] = []
                    var heard: Set<AccountID> = []
                    func receive(until reader: AccountID) async throws {
                        while !heard.contains(reader), let frame = try await wire.next() {
                            guard case .event(.groupReceipts(let event)) = frame else { continue }
                            for update in event.updates where update.messageID == sent.message.id {
                                counts.append(update.readCount)
                                heard.formUnion(update.readers.keys)
                            }
                        }
                    }
                    // r1 reads through B, held on its way to A's devices; r3 reads through A after it, and its count
                    // (2) reaches the device first; then r1's (1, without the floor) alone, then r2 and r4.
                    gate.hold()
                    try await read("r1", through: nodeB)
                    try await read("r3", through: nodeA)
                    try await receive(until: "r3")
                    gate.release()
                    try await receive(until: "r1")
                    try await read("r2", through: nodeB)
                    try await read("r4", through: nodeA)
                    for reader in readers { try await receive(until: reader) }
                    #expect(heard == Set(readers))
                    #expect(counts == counts.sorted(), "read counts as received: \(counts)")
                    #expect(counts.last == 4, "\(counts)")
                }
            }
        }
    }
}
