// Courier — Apache-2.0
import CourierSDK
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// `POST /v1/import` (docs/import.md) on every backend: a chunk of history lines is stored once however often it is
/// sent, a line that is not a record stops the chunk there, and a connected device hears of none of it.
@Suite("History import through REST", .timeLimit(.minutes(5)))
struct HistoryImportRESTTests {
    struct Summary: Decodable, Equatable {
        struct Skipped: Decodable, Equatable { let line: Int; let code: String }
        let lines, accounts, groups, messages, reads, recalls, duplicates, skippedCount: Int
        let skipped: [Skipped]
    }

    static let chunk = [
        #"{"kind":"account","id":"alice","createdAt":1500000000000}"#,
        #"{"kind":"message","id":"m1","from":"alice","to":"bob","time":1577838000000,"body":"hello 你好 🙂","ext":{"k":"v"}}"#,
        #"{"kind":"message","id":"m2","from":"bob","to":"alice","time":1577838001000,"type":"image","body":"{\"url\":\"https://x/1.jpg\"}","replyTo":"m1"}"#,
        "",
        #"{"kind":"group","id":"team-created","group":"team","action":"created","by":"alice","accounts":["bob","carol"],"time":1577838002000}"#,
        #"{"kind":"message","id":"m3","from":"carol","group":"team","time":1577838003000,"body":"hi team","needsReadReceipt":true}"#,
        #"{"kind":"read","account":"bob","with":"alice","upTo":"m1","time":1577838004000}"#,
        #"{"kind":"read","account":"bob","group":"team","upTo":"m3","time":1577838004000}"#,
        #"{"kind":"recall","id":"recall-m2","message":"m2","by":"bob","time":1577838005000}"#,
        #"{"kind":"read","account":"dave","group":"team","upTo":"m3","time":1577838006000}"#,
    ].joined(separator: "\n")

    /// The message of the first event a connection is sent; `nil` (with an issue) when another event comes first.
    static func firstMessage(on connection: RawConnection) async throws -> WireMessage? {
        while let frame = try await connection.next() {
            // A PostgreSQL node whose listener (re)connects tells its devices to sync: not news of the import.
            guard case .event(let event) = frame else { continue }
            if case .syncRequired = event { continue }
            guard case .message(let payload) = event else {
                Issue.record("the device was sent \(event) before the live message")
                return nil
            }
            return payload.message
        }
        return nil
    }

    static func post(_ server: TestServer, _ body: String) async throws -> (status: Int, body: Data) {
        try await server.restResponse("POST", "/v1/import", body: body, contentType: "application/x-ndjson")
    }

    @Test("a chunk sent twice is stored once; a bad line stops the chunk there; devices hear of none of it", arguments: ServerBackend.available)
    func importChunks(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("bob")
            // bob's device is connected throughout (a bare connection: what the server sends, frame by frame).
            try await server.withRawConnection { bob in
                guard case .ack = try await bob.connect(as: "bob", server: server) else {
                    Issue.record("bob could not connect")
                    return
                }
                try await Self.importWhileConnected(server, bob)
            }
        }
    }

    @Test(
        "an import through one node is not announced to another node's devices either",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func otherNodeHearsNothing() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("bob")
                try await nodeB.server.withRawConnection { bob in
                    guard case .ack = try await bob.connect(as: "bob", server: nodeB.server) else {
                        Issue.record("bob could not connect to node B")
                        return
                    }
                    let (status, body) = try await Self.post(nodeA.server, Self.chunk)
                    #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
                    // A live message through node A reaches bob's device on node B through the notifications; had the
                    // import notified node B, its entries would have come first.
                    let live = #"{"from":"alice","clientId":"live-1","body":"live"}"#
                    let (sent, _) = try await nodeA.server.restResponse("POST", "/v1/conversations/d:alice:bob/messages", body: live)
                    #expect(sent == 200)
                    #expect(try await Self.firstMessage(on: bob)?.body == "live")
                }
            }
        }
    }

    static func importWhileConnected(_ server: TestServer, _ bob: RawConnection) async throws {
        do {
            let (status, body) = try await Self.post(server, Self.chunk)
            #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
            let first = try JSONDecoder().decode(Summary.self, from: body)
            #expect(first.lines == 10 && first.messages == 3 && first.groups == 1 && first.recalls == 1 && first.reads == 2)
            #expect(first.duplicates == 0 && first.accounts == 4)
            // dave is not in the group: his read is skipped, with the code a live read would get.
            #expect(first.skipped == [.init(line: 10, code: "conversation.notAMember")] && first.skippedCount == 1)
            let again = try JSONDecoder().decode(Summary.self, from: try await Self.post(server, Self.chunk).body)
            #expect(again.messages == 0 && again.groups == 0 && again.recalls == 0 && again.duplicates == 5)

            // The history as the source has it: ids, times, bodies, ext; the reply quotes; the recall erased m2.
            let (_, page) = try await server.restResponse("GET", "/v1/conversations/d:alice:bob/messages?account=bob")
            struct Page: Decodable { let messages: [WireMessage] }
            let direct = try JSONDecoder().decode(Page.self, from: page).messages
            #expect(direct.map(\.id.rawValue) == ["m1", "m2", "recall-m2"])
            #expect(direct[0].body == "hello 你好 🙂" && direct[0].ext == ["k": "v"] && direct[0].time.rawValue == 1_577_838_000_000)
            #expect(direct[1].recalled == true && direct[1].body.isEmpty && direct[2].recall?.recalledBy == "bob")
            let (_, unread) = try await server.restResponse("GET", "/v1/accounts/alice/unread")
            struct Unread: Decodable { let conversations: [String: Int] }
            #expect(try JSONDecoder().decode(Unread.self, from: unread).conversations == ["g:team": 1])
            let (_, counts) = try await server.restResponse(
                "POST", "/v1/conversations/g:team/receipt-counts", body: #"{"messageIds":["m3"]}"#
            )
            #expect(String(decoding: counts, as: UTF8.self).contains(#""readCount":1"#), "\(String(decoding: counts, as: UTF8.self))")

            // An id another entry has is refused, whoever's line it is, in the same chunk or a later one; the rest goes on.
            let reused = [
                #"{"kind":"message","id":"m1","from":"carol","to":"bob","time":1577838006000,"body":"m1 again"}"#,
                #"{"kind":"message","id":"x1","from":"carol","to":"bob","time":1577838007000,"body":"x"}"#,
                #"{"kind":"message","id":"x1","from":"dave","to":"bob","time":1577838008000,"body":"x again"}"#,
                #"{"kind":"group","id":"m3","group":"team","action":"added","by":"alice","accounts":["dave"],"time":1577838009000}"#,
                #"{"kind":"recall","id":"x1","message":"m3","by":"carol","time":1577838010000}"#,
            ].joined(separator: "\n")
            let (reusedStatus, reusedBody) = try await Self.post(server, reused)
            #expect(reusedStatus == 200, "\(String(decoding: reusedBody, as: UTF8.self))")
            let collisions = try JSONDecoder().decode(Summary.self, from: reusedBody)
            #expect(collisions.messages == 1 && collisions.groups == 0 && collisions.recalls == 0)
            #expect(collisions.skipped.map(\.line) == [1, 3, 4, 5], "\(collisions.skipped)")
            #expect(collisions.skipped.allSatisfy { $0.code == "message.idInUse" }, "\(collisions.skipped)")

            // A line that is not a record: the lines before it are stored, it and those after are not.
            let bad = [
                #"{"kind":"message","id":"m4","from":"alice","to":"bob","time":1577838010000,"body":"four"}"#,
                #"{"kind":"message","id":"m5","from":"alice","to":"bob","time":"yesterday","body":"five"}"#,
                #"{"kind":"message","id":"m6","from":"alice","to":"bob","time":1577838012000,"body":"six"}"#,
            ].joined(separator: "\n")
            let (refused, problem) = try await Self.post(server, bad)
            let detail = String(decoding: problem, as: UTF8.self)
            #expect(refused == 400 && detail.contains(#""code":"import.invalidRecord""#) && detail.contains("line 2: "), "\(detail)")
            let (_, afterBad) = try await server.restResponse("GET", "/v1/conversations/d:alice:bob/messages?account=bob")
            #expect(try JSONDecoder().decode(Page.self, from: afterBad).messages.map(\.id.rawValue) == ["m1", "m2", "recall-m2", "m4"])

            // A recall of a message an earlier chunk stored is looked up, then erases it as a live recall would.
            let recall = #"{"kind":"recall","id":"recall-m1","message":"m1","by":"alice","time":1577838013000}"#
            let recalled = try JSONDecoder().decode(Summary.self, from: try await Self.post(server, recall).body)
            #expect(recalled.recalls == 1 && recalled.skippedCount == 0, "\(recalled)")
            let (_, afterRecall) = try await server.restResponse("GET", "/v1/conversations/d:alice:bob/messages?account=bob")
            let m1 = try JSONDecoder().decode(Page.self, from: afterRecall).messages.first
            #expect(m1?.id == "m1" && m1?.recalled == true && m1?.body.isEmpty == true)

            // Bob's device heard of none of it: the first event it gets is a live message sent now.
            let live = #"{"from":"alice","clientId":"live-1","body":"live"}"#
            let (sent, _) = try await server.restResponse("POST", "/v1/conversations/d:alice:bob/messages", body: live)
            #expect(sent == 200)
            let received = try await Self.firstMessage(on: bob)
            #expect(received?.body == "live" && received?.seq.rawValue == 6)
        }
    }
}
