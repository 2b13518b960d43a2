// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Bad input gets a stable error and leaves the connection and data intact", .timeLimit(.minutes(5)))
struct BadInputTests {
    let conversation = ConversationID.direct("alice", "bob")

    /// Sends `text` on an authenticated raw connection and returns the error code; then checks the connection
    /// still answers a ping and that nothing was stored.
    private func errorCode(for text: String, expectID: RequestID? = "bad") async throws -> ErrorCode? {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            return try await server.withRawConnection { connection in
                guard case .ack = try await connection.connect(as: "alice", server: server) else { return nil }
                try await connection.send(text: text)
                guard case .error(let id, let error) = try await connection.answer(to: expectID) else { return nil }
                #expect(id == expectID)
                #expect(!error.message.isEmpty)
                let pong = try await connection.request(.ping("after"))
                guard case .ack(_, .ping) = pong else {
                    Issue.record("The connection did not stay up: \(String(describing: pong))")
                    return nil
                }
                #expect(try await server.store.messages(in: conversation, after: .zero, limit: 10).isEmpty)
                return error.code
            }
        }
    }

    @Test("malformed JSON is frame.invalid")
    func malformedJSON() async throws {
        #expect(try await errorCode(for: "{not json", expectID: nil) == .frameInvalid)
    }

    @Test("an unknown frame type is frame.unknownType")
    func unknownType() async throws {
        #expect(try await errorCode(for: #"{"type":"teleport","id":"bad","data":{}}"#) == .frameUnknownType)
    }

    @Test("a missing field is frame.invalid")
    func missingField() async throws {
        let text = #"{"type":"send","id":"bad","data":{"conversation":"d:alice:bob","body":"x"}}"#
        #expect(try await errorCode(for: text) == .frameInvalid)
    }

    @Test("a body over the limit is message.bodyTooLarge")
    func oversizedBody() async throws {
        let body = String(repeating: "x", count: 64 * 1024 + 1)
        let text =
            #"{"type":"send","id":"bad","data":{"conversation":"d:alice:bob","clientId":"c1","body":"\#(body)"}}"#
        #expect(try await errorCode(for: text) == .messageBodyTooLarge)
    }

    @Test("a frame over the limit is frame.tooLarge")
    func oversizedFrame() async throws {
        let body = String(repeating: "y", count: 300 * 1024)
        let text =
            #"{"type":"send","id":"bad","data":{"conversation":"d:alice:bob","clientId":"c1","body":"\#(body)"}}"#
        #expect(try await errorCode(for: text) == .frameTooLarge, "answered with the id read from the frame's head")
        // An id the head does not hold is not guessed at.
        let late = #"{"type":"send","data":{"conversation":"d:alice:bob","clientId":"c1","body":"\#(body)"},"id":"bad"}"#
        #expect(try await errorCode(for: late, expectID: nil) == .frameTooLarge)
    }

    @Test("a conversation the caller is not in is conversation.notAMember")
    func notAMember() async throws {
        let text = #"{"type":"send","id":"bad","data":{"conversation":"d:bob:carol","clientId":"c1","body":"x"}}"#
        #expect(try await errorCode(for: text) == .conversationNotAMember)
    }

    @Test("an unknown recipient is account.notFound")
    func unknownAccount() async throws {
        let text = #"{"type":"send","id":"bad","data":{"conversation":"d:alice:zed","clientId":"c1","body":"x"}}"#
        #expect(try await errorCode(for: text) == .accountNotFound)
    }

    @Test("a malformed conversation id is conversation.invalid")
    func malformedConversation() async throws {
        let text = #"{"type":"send","id":"bad","data":{"conversation":"d:bob:alice","clientId":"c1","body":"x"}}"#
        #expect(try await errorCode(for: text) == .conversationInvalid)
    }

    @Test("a sync with a negative cursor or a recent count below 1 is request.invalidArgument")
    func badSync() async throws {
        for data in [#"{"cursors":{"d:alice:bob":-1}}"#, #"{"cursors":{},"recent":0}"#] {
            #expect(try await errorCode(for: #"{"type":"sync","id":"bad","data":\#(data)}"#) == .invalidArgument)
        }
    }

    @Test("a receipt beyond the last message is receipt.beyondLastMessage")
    func receiptBeyondEnd() async throws {
        let code = try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            try await alice.send("one", to: conversation).stored()
            return try await server.withRawConnection { connection in
                _ = try await connection.connect(as: "bob", server: server)
                let reply = try await connection.request(
                    .deliver("r", DeliverRequest(conversation: conversation, seq: 5))
                )
                guard case .error(_, let error) = reply else { return ErrorCode?.none }
                return error.code
            }
        }
        #expect(code == .receiptBeyondLastMessage)
    }

    @Test("a message id from another conversation is message.notInConversation")
    func messageFromAnotherConversation() async throws {
        let code = try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let carol = try await server.connectedClient("carol")
            let elsewhere = try await carol.send("not yours", to: .direct("alice", "carol")).stored()
            let alice = try await server.connectedClient("alice")
            try await alice.send("hi bob", to: conversation).stored()
            return try await server.withRawConnection { connection in
                _ = try await connection.connect(as: "alice", server: server)
                let request = DeliverRequest(conversation: conversation, seq: nil, messageID: elsewhere.id)
                guard case .error(_, let error) = try await connection.request(.deliver("r", request)) else {
                    return ErrorCode?.none
                }
                return error.code
            }
        }
        #expect(code == .messageNotInConversation)
    }

    @Test("requests before connect are auth.required")
    func requestBeforeConnect() async throws {
        let code = try await withTestServer { server in
            try await server.withRawConnection { connection in
                guard case .error(_, let error) = try await connection.request(.ping("early")) else {
                    return ErrorCode?.none
                }
                return error.code
            }
        }
        #expect(code == .authRequired)
    }

    @Test("a bad token, an expired token and another account's id are refused, and the connection stays usable")
    func badTokens() async throws {
        // Four refusals and an accept on one connection must fit in the server's time to authenticate, which a loaded
        // machine (ThreadSanitizer, the whole suite in parallel) can spend at its default of 10 s.
        try await withTestServer(configure: { $0.limits.authTimeout = .seconds(120) }) { server in
            try await server.register("alice")
            let expired = try await server.token(for: "alice", lifetime: .seconds(-60))
            let forged = try await TokenAuthority(secret: try AppSecret(String(repeating: "z", count: 40)))
                .token(for: "alice")
            let valid = try await server.token(for: "alice")
            let cases: [(ConnectRequest, ErrorCode)] = [
                (ConnectRequest(token: "not-a-jwt", account: "alice", device: "d"), .authInvalidToken),
                (ConnectRequest(token: expired, account: "alice", device: "d"), .authInvalidToken),
                (ConnectRequest(token: forged, account: "alice", device: "d"), .authInvalidToken),
                (ConnectRequest(token: valid, account: "mallory", device: "d"), .authAccountMismatch),
            ]
            try await server.withRawConnection { connection in
                for (index, (request, code)) in cases.enumerated() {
                    let reply = try await connection.request(.connect(RequestID(rawValue: "c\(index)"), request))
                    guard case .error(_, let error) = reply else {
                        Issue.record("case \(index) was accepted")
                        continue
                    }
                    #expect(error.code == code, "case \(index)")
                }
                let reply = try await connection.request(
                    .connect("ok", ConnectRequest(token: valid, account: "alice", device: "d"))
                )
                guard case .ack(_, .connect(let ack)) = reply else {
                    Issue.record("valid token refused: \(String(describing: reply))")
                    return
                }
                #expect(ack.account == "alice")
            }
        }
    }

    @Test("the SDK reports a refused token as unauthorized and stops")
    func sdkUnauthorized() async throws {
        try await withTestServer { server in
            let client = try server.client()
            await #expect(throws: CourierError.self) {
                try await client.connect(account: "alice", token: "garbage")
            }
            #expect(
                client.connectionState
                    == .disconnected(.unauthorized("The token is not a valid client token for this server."))
            )
        }
    }

    @Test("the REST API refuses a request without the app secret")
    func restNeedsSecret() async throws {
        try await withTestServer { server in
            var request = URLRequest(url: server.httpURL.appendingPathComponent("v1/accounts/dave"))
            request.httpMethod = "PUT"
            let (_, refused) = try await URLSession.shared.data(for: request)
            #expect((refused as? HTTPURLResponse)?.statusCode == 401)
            request.setValue("Bearer \(server.secret.value)", forHTTPHeaderField: "Authorization")
            let (_, accepted) = try await URLSession.shared.data(for: request)
            #expect((accepted as? HTTPURLResponse)?.statusCode == 204)
            #expect(try await server.store.accountExists("dave"))
        }
    }

    @Test(
        "the REST API registers many accounts at once, or none when one id is bad",
        arguments: ServerBackend.available
    )
    func restRegistersMany(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let accepted = try await Self.postAccounts(#"{"accounts": ["erin", "frank", "erin"]}"#, to: server)
            #expect(accepted == 204)
            let (erin, frank) = (
                try await server.store.accountExists("erin"), try await server.store.accountExists("frank")
            )
            #expect(erin && frank)
            let refused = try await Self.postAccounts(#"{"accounts": ["gina", "not valid!"]}"#, to: server)
            let empty = try await Self.postAccounts(#"{"accounts": []}"#, to: server)
            #expect(refused == 400 && empty == 400)
            let half = try await server.store.accountExists("gina")
            #expect(!half)
        }
    }

    static func postAccounts(_ body: String, to server: TestServer) async throws -> Int? {
        try await server.rest("POST", "v1/accounts", body: body).status
    }

    @Test("a REST body that is not the expected JSON is refused with request.invalidArgument, nothing written")
    func restMalformedBody() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let conversation = ConversationID.direct("alice", "bob")
            for (path, body) in [
                ("v1/accounts", #"{"accounts": "erin"}"#),
                ("v1/accounts", "not json"),
                ("v1/conversations/\(conversation)/reads", #"{"accounts": ["bob"]}"#),
                ("v1/conversations/\(conversation)/reads", #"{"accounts": ["bob"], "seq": "one"}"#),
                ("v1/conversations/\(conversation)/recall", "{}"),
            ] {
                let answer = try await server.rest("POST", path, body: body)
                #expect(answer.status == 400 && answer.code == "request.invalidArgument", "\(path) \(body)")
            }
            #expect(try await !server.store.accountExists("erin"))
        }
    }
}
