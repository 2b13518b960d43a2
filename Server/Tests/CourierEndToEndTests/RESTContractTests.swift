// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The REST contract as docs/rest.md and docs/protocol.md §8 state it: each deviation a client written
/// from the docs found, checked against a real server on 127.0.0.1.
@Suite("REST contract", .timeLimit(.minutes(5)))
struct RESTContractTests {
    /// The status, the headers and the problem's `code` of a request with the app secret.
    func answer(
        _ server: TestServer,
        _ method: String,
        _ path: String,
        body: String? = nil
    ) async throws -> (status: Int, code: String?, headers: [String: String], body: Data) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)" + path)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(server.secret.value)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var headers: [String: String] = [:]
        for (key, value) in http?.allHeaderFields ?? [:] { headers["\(key)".lowercased()] = "\(value)" }
        struct Problem: Decodable { let code: String? }
        return (http?.statusCode ?? 0, try? JSONDecoder().decode(Problem.self, from: data).code, headers, data)
    }

    @Test("every paged operation refuses a limit outside its documented range, and history pages oldest first")
    func limits() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let team = ConversationID.group("team")
            #expect(try await server.rest("POST", "/v1/groups", body: #"{"group":"team","owner":"alice","members":["bob"]}"#).status == 201)
            let (_, sent) = try await server.restResponse(
                "POST", "/v1/conversations/\(team)/messages",
                body: #"{"from":"alice","clientId":"a1","body":"lunch?","needsReadReceipt":true}"#
            )
            let message = try JSONDecoder().decode(SendAck.self, from: sent).message
            _ = try await server.rest("POST", "/v1/conversations/\(team)/messages", body: #"{"from":"bob","clientId":"b1","body":"yes"}"#)
            let endpoint = try await answer(server, "POST", "/v1/webhooks", body: #"{"url":"http://127.0.0.1:9/hook"}"#)
            struct Created: Decodable { let id: String }
            let webhook = try JSONDecoder().decode(Created.self, from: endpoint.body).id
            let paged: [(path: String, range: ClosedRange<Int>)] = [
                ("/v1/conversations/\(team)/messages?account=bob", 1...1000),
                ("/v1/conversations/\(team)/messages/\(message.id)/undelivered", 1...1000),
                ("/v1/conversations/\(team)/messages/\(message.id)/receipts/unread", 1...100),
                ("/v1/groups/team/members", 1...100),
                ("/v1/webhooks/\(webhook)/deliveries", 1...100),
            ]
            for (path, range) in paged {
                let separator = path.contains("?") ? "&" : "?"
                for limit in [range.lowerBound - 1, range.upperBound + 1] {
                    let refused = try await server.rest("GET", "\(path)\(separator)limit=\(limit)")
                    #expect(refused.status == 400 && refused.code == "request.invalidArgument", "\(path) limit=\(limit)")
                }
                #expect(try await server.rest("GET", "\(path)\(separator)limit=\(range.upperBound)").status == 200, "\(path)")
            }
            // Oldest first within the page.
            let (_, page) = try await server.restResponse("GET", "/v1/conversations/\(team)/messages?account=bob&limit=2")
            let seqs = try JSONDecoder().decode(HistoryAck.self, from: page).messages.map(\.seq.rawValue)
            #expect(seqs.count == 2 && seqs == seqs.sorted())
        }
    }

    @Test("a problem's title is its status's reason phrase, whichever code made it")
    func problemTitles() async throws {
        try await withTestServer { server in
            struct Problem: Decodable { let title: String; let status: Int }
            func problem(_ method: String, _ path: String, body: String? = nil) async throws -> Problem {
                try JSONDecoder().decode(Problem.self, from: try await answer(server, method, path, body: body).body)
            }
            let refused = try await problem("POST", "/v1/webhooks", body: #"{"url":"http://127.0.0.1:9/hook","events":[]}"#)
            #expect(refused.status == 400 && refused.title == "Bad Request")
            let missing = try await problem("GET", "/v1/webhooks/whep_nothing")
            #expect(missing.status == 404 && missing.title == "Not Found")
            let method = try await problem("DELETE", "/v1/accounts")
            #expect(method.status == 405 && method.title == "Method Not Allowed")
            let noGroup = try await problem("GET", "/v1/groups/nothing/members")
            #expect(noGroup.status == 404 && noGroup.title == "Not Found")
        }
    }

    @Test("a webhook endpoint naming no event is refused and not created")
    func emptyEvents() async throws {
        try await withTestServer { server in
            let refused = try await answer(server, "POST", "/v1/webhooks", body: #"{"url":"http://127.0.0.1:9/hook","events":[]}"#)
            #expect(refused.status == 400 && refused.code == "request.invalidArgument")
            let (_, list) = try await server.restResponse("GET", "/v1/webhooks")
            struct List: Decodable { struct Endpoint: Decodable { let id: String }; let endpoints: [Endpoint] }
            #expect(try JSONDecoder().decode(List.self, from: list).endpoints.isEmpty)
            #expect(try await answer(server, "GET", "/v1/webhooks/whep_nothing").code == "request.notFound")
        }
    }

    @Test("a method a path does not take is 405 request.methodNotAllowed with Allow; an unknown path stays 404")
    func methodNotAllowed() async throws {
        try await withTestServer { server in
            let delete = try await answer(server, "DELETE", "/v1/accounts")
            #expect(delete.status == 405 && delete.code == "request.methodNotAllowed")
            #expect(delete.headers["allow"] == "GET, POST", "\(delete.headers)")
            let put = try await answer(server, "PUT", "/v1/groups/team/members")
            #expect(put.status == 405 && put.headers["allow"] == "GET")
            let ready = try await answer(server, "POST", "/health/ready")
            #expect(ready.status == 405 && ready.headers["allow"] == "GET, HEAD")
            let unknown = try await answer(server, "GET", "/v1/nothing/here")
            #expect(unknown.status == 404 && unknown.code == "request.notFound" && unknown.headers["allow"] == nil)
            #expect(unknown.headers["x-request-id"]?.isEmpty == false)
        }
    }

    @Test("an app's recall says so (byApp), a sender's does not; {} mints a token within a lower maximum lifetime")
    func recallByAppAndTokenDefaults() async throws {
        try await withTestServer(configure: { $0.tokens.maxLifetime = .seconds(3600) }) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            func send(_ clientID: String) async throws -> WireMessage {
                let (_, data) = try await server.restResponse(
                    "POST", "/v1/conversations/\(direct)/messages",
                    body: #"{"from":"alice","clientId":"\#(clientID)","body":"oops"}"#
                )
                return try JSONDecoder().decode(SendAck.self, from: data).message
            }
            let first = try await send("c1")
            let (status, data) = try await server.restResponse(
                "POST", "/v1/conversations/\(direct)/recall", body: #"{"messageId":"\#(first.id)"}"#
            )
            #expect(status == 200)
            let notice = try JSONDecoder().decode(SendAck.self, from: data).message.recall
            #expect(notice?.byApp == true && notice?.recalledBy == "alice")
            let second = try await send("c2")
            let alice = try await server.connectedClient("alice")
            try await alice.recall(second.id, in: direct)
            let (_, history) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages?account=bob")
            let notices = try JSONDecoder().decode(HistoryAck.self, from: history).messages.compactMap(\.recall)
            #expect(notices.map(\.byApp) == [true, nil])

            let minted = try await answer(server, "POST", "/v1/accounts/alice/tokens", body: "{}")
            #expect(minted.status == 201, "\(String(decoding: minted.body, as: UTF8.self))")
            struct Token: Decodable { let expiresAt: Int64 }
            let expiresAt = try JSONDecoder().decode(Token.self, from: minted.body).expiresAt
            #expect(expiresAt <= Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000)
            let tooLong = try await answer(server, "POST", "/v1/accounts/alice/tokens", body: #"{"ttlSeconds":7200}"#)
            #expect(tooLong.status == 400 && tooLong.code == "request.invalidArgument")
        }
    }

    @Test("a direct conversation's delivered and read state per member; a group's is refused, an empty one not found")
    func directReceipts() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            #expect(try await server.rest("GET", "/v1/conversations/\(direct)/receipts").code == "conversation.notFound")
            for clientID in ["a1", "a2"] {
                _ = try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: #"{"from":"alice","clientId":"\#(clientID)","body":"hi"}"#)
            }
            #expect(try await server.rest("POST", "/v1/conversations/\(direct)/reads", body: #"{"accounts":["bob"],"seq":1}"#).status == 204)
            struct State: Decodable {
                struct Member: Decodable { struct Mark: Decodable { let seq: Int64 }; let account: String; let delivered: Mark; let read: Mark }
                let lastSeq: Int64
                let members: [Member]
            }
            let (status, body) = try await server.restResponse("GET", "/v1/conversations/\(direct)/receipts")
            #expect(status == 200)
            let state = try JSONDecoder().decode(State.self, from: body)
            let bob = state.members.first { $0.account == "bob" }
            #expect(state.lastSeq == 2 && bob?.read.seq == 1 && bob?.delivered.seq == 1)
            #expect(try await server.rest("GET", "/v1/conversations/g:team/receipts").code == "conversation.invalid")
        }
    }
}
