// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// The REST API for the app's backend, end to end on every backend: what the backend does through it is
/// seen by real SDK clients connected to the same server, and every refusal carries its documented status and code.
@Suite("REST API", .timeLimit(.minutes(5)))
struct RESTAPITests {
    /// A REST call that must succeed with `status`; its body decoded as `T`.
    func call<T: Decodable>(
        _ server: TestServer,
        _ method: String,
        _ path: String,
        _ body: String? = nil,
        expect status: Int = 200,
        as _: T.Type = T.self,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> T {
        let (answered, data) = try await server.restResponse(method, path, body: body)
        #expect(answered == status, "\(method) \(path): \(String(decoding: data, as: UTF8.self))", sourceLocation: sourceLocation)
        return try JSONDecoder().decode(T.self, from: data)
    }

    struct Account: Decodable { let id: String; let devicesOnline: Int }
    struct Token: Decodable { let token: String; let expiresAt: Int64 }
    struct Group: Decodable { let id: String; let conversation: String; let memberCount: Int; let lastSeq: Int64 }

    @Test("accounts: register, look up, mint a token a real client connects with, unread counts, settings", arguments: ServerBackend.available)
    func accounts(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            #expect(try await server.rest("POST", "/v1/accounts", body: #"{"accounts":["alice","bob"]}"#).status == 204)
            #expect(try await server.rest("PUT", "/v1/accounts/carol").status == 204)
            let unknown = try await server.rest("GET", "/v1/accounts/zed")
            #expect(unknown.status == 404 && unknown.code == "account.notFound")
            #expect(try await call(server, "GET", "/v1/accounts/alice", as: Account.self).devicesOnline == 0)

            // A token minted by the API is what a device connects with.
            let minted = try await call(server, "POST", "/v1/accounts/alice/tokens", #"{"ttlSeconds":600}"#, expect: 201, as: Token.self)
            let expected = Int64(Date().timeIntervalSince1970 * 1000) + 600_000
            #expect(abs(minted.expiresAt - expected) < 60_000)
            let alice = try server.client(device: "phone")
            try await alice.connect(account: "alice", token: minted.token)
            #expect(try await call(server, "GET", "/v1/accounts/alice", as: Account.self).devicesOnline == 1)
            let tooShort = try await server.rest("POST", "/v1/accounts/alice/tokens", body: #"{"ttlSeconds":1}"#)
            #expect(tooShort.status == 400 && tooShort.code == "request.invalidArgument")
            #expect(try await server.rest("POST", "/v1/accounts/zed/tokens", body: "{}").code == "account.notFound")

            // Unread counts are the account's own, as its devices see them.
            let conversation = ConversationID.direct("alice", "bob")
            for text in ["one", "two"] { _ = try await alice.send(text, to: conversation).stored() }
            let unread = try await call(server, "GET", "/v1/accounts/bob/unread", as: UnreadAck.self)
            #expect(unread.total == 2 && unread.conversations == [conversation: 2])

            // Read-receipt settings, global and per conversation.
            let before = try await call(server, "GET", "/v1/accounts/bob/read-receipt-settings", as: ReadReceiptSettings.self)
            #expect(before.sendReadReceipts && before.conversations.isEmpty)
            let after = try await call(
                server, "PUT", "/v1/accounts/bob/read-receipt-settings",
                #"{"conversation":"\#(conversation)","sendReadReceipts":false}"#, as: ReadReceiptSettings.self
            )
            #expect(after.sendReadReceipts && after.conversations == [conversation: false])
            let outside = try await server.rest(
                "PUT", "/v1/accounts/carol/read-receipt-settings",
                body: #"{"conversation":"\#(conversation)","sendReadReceipts":false}"#
            )
            #expect(outside.status == 403 && outside.code == "conversation.notAMember")
        }
    }

    @Test("messages: send as an account reaches its peer's device, idempotent on clientId; history and one message", arguments: ServerBackend.available)
    func messages(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let bob = try await server.connectedClient("bob")
            let aliceTablet = try await server.connectedClient("alice", device: "tablet")
            let bobEvents = bob.events()
            let tabletEvents = aliceTablet.events()
            let conversation = ConversationID.direct("alice", "bob")
            let path = "/v1/conversations/\(conversation)/messages"
            let body = #"{"from":"alice","clientId":"order-1","type":"text","body":"Your order has shipped."}"#

            let sent = try await call(server, "POST", path, body, as: SendAck.self)
            #expect(!sent.duplicate && sent.message.seq == Seq(1) && sent.message.sender == "alice")
            // The peer's device and the sender's own devices receive it live.
            #expect(try await bobEvents.first { $0.receivedMessage }.id == sent.message.id)
            #expect(try await tabletEvents.first { $0.receivedMessage }.body == "Your order has shipped.")
            // The same clientId again: the first message's ack, nothing appended.
            let again = try await call(server, "POST", path, body, as: SendAck.self)
            #expect(again.duplicate && again.message.id == sent.message.id)

            let history = try await call(server, "GET", "\(path)?account=bob", as: HistoryAck.self)
            #expect(history.messages.map(\.id) == [sent.message.id] && !history.hasMore)
            let one = try await call(server, "GET", "\(path)/\(sent.message.id)", as: WireMessage.self)
            #expect(one == sent.message)

            // Refusals, each with its code and status; nothing is appended by any of them.
            let outsider = try await server.rest(
                "POST", "/v1/conversations/\(ConversationID.direct("alice", "carol"))/messages",
                body: #"{"from":"bob","clientId":"x","body":"hi"}"#
            )
            #expect(outsider.status == 403 && outsider.code == "conversation.notAMember")
            let missing = try await server.rest("GET", "\(path)/no-such-message")
            #expect(missing.status == 404 && missing.code == "message.notFound")
            let noBody = try await server.rest("POST", path, body: #"{"from":"alice","clientId":"y"}"#)
            #expect(noBody.status == 400 && noBody.code == "request.invalidArgument")
            // A field the operation does not take is refused, named, rather than ignored: here a typo of
            // `needsReadReceipt` that would otherwise send a message without asking for receipts.
            let (typo, typoBody) = try await server.restResponse(
                "POST", path, body: #"{"from":"alice","clientId":"z","body":"hi","needReadReceipt":true}"#
            )
            #expect(typo == 400 && String(decoding: typoBody, as: UTF8.self).contains("unknown field 'needReadReceipt'"))
            let badID = try await server.rest("GET", "/v1/conversations/not-a-conversation/messages?account=bob")
            #expect(badID.status == 400 && badID.code == "conversation.invalid")
            let noAccount = try await server.rest("GET", path)
            #expect(noAccount.status == 400 && noAccount.code == "request.invalidArgument")
            #expect(try await call(server, "GET", "\(path)?account=alice", as: HistoryAck.self).messages.count == 1)
        }
    }

    @Test("groups: create, look up, page members, change as a member with its role's rights", arguments: ServerBackend.available)
    func groups(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol", "dave", "erin")
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let created = try await call(
                server, "POST", "/v1/groups", #"{"group":"team","owner":"alice","members":["bob","carol"]}"#,
                expect: 201, as: SendAck.self
            )
            #expect(created.message.group?.action == .created)
            #expect(try await bobEvents.first { $0.receivedMessage }.id == created.message.id)
            let again = try await server.rest("POST", "/v1/groups", body: #"{"group":"team","owner":"bob"}"#)
            #expect(again.status == 409 && again.code == "group.alreadyExists")

            let group = try await call(server, "GET", "/v1/groups/team", as: Group.self)
            #expect(group.conversation == "g:team" && group.memberCount == 3 && group.lastSeq == 1)
            let first = try await call(server, "GET", "/v1/groups/team/members?limit=2", as: GroupMembersAck.self)
            #expect(first.members.map(\.account) == ["alice", "bob"] && first.total == 3)
            let cursor = try #require(first.nextCursor)
            let second = try await call(server, "GET", "/v1/groups/team/members?limit=2&cursor=\(cursor)", as: GroupMembersAck.self)
            #expect(second.members.map(\.account) == ["carol"] && second.nextCursor == nil)
            #expect(second.members.first?.role == .member && first.members.first?.role == .owner)

            // A member may not add; the owner may; an admin appointed by the owner may then remove a member.
            let changes = "/v1/groups/team/changes"
            let refused = try await server.rest("POST", changes, body: #"{"by":"bob","action":"add","accounts":["dave"]}"#)
            #expect(refused.status == 403 && refused.code == "group.notPermitted")
            let added = try await call(server, "POST", changes, #"{"by":"alice","action":"add","accounts":["dave","erin"]}"#, as: SendAck.self)
            #expect(added.message.group?.accounts == ["dave", "erin"])
            _ = try await call(server, "POST", changes, #"{"by":"alice","action":"setRole","accounts":["bob"],"role":"admin"}"#, as: SendAck.self)
            _ = try await call(server, "POST", changes, #"{"by":"bob","action":"remove","accounts":["erin"]}"#, as: SendAck.self)
            _ = try await call(server, "POST", changes, #"{"by":"alice","action":"transferOwnership","accounts":["carol"]}"#, as: SendAck.self)
            let members = try await call(server, "GET", "/v1/groups/team/members", as: GroupMembersAck.self)
            #expect(members.members.map { "\($0.account):\($0.role)" } == ["alice:member", "bob:admin", "carol:owner", "dave:member"])
            // Bob's device saw every change as a log entry.
            #expect(try await bobEvents.collect(4) { $0.receivedMessage }.count == 4)

            let unknown = try await server.rest("GET", "/v1/groups/nope")
            #expect(unknown.status == 404 && unknown.code == "group.notFound")
            let badAction = try await server.rest("POST", changes, body: #"{"by":"alice","action":"dissolve"}"#)
            #expect(badAction.status == 400 && badAction.code == "request.invalidArgument")

            // Dismissal (NIM `team/remove`): in the owner's name, the last entry every member's devices receive; the
            // group is then gone, a second DELETE included, and its id is not given out again.
            let dismissed = try await call(server, "DELETE", "/v1/groups/team", as: SendAck.self)
            #expect(dismissed.message.group == WireGroupChange(action: .dismissed, accounts: []))
            #expect(dismissed.message.sender == "carol" && dismissed.message.seq.rawValue == 6)
            #expect(try await bobEvents.first { $0.receivedMessage.flatMap { $0.id == dismissed.message.id ? $0 : nil } }.groupChange?.action == .dismissed)
            for (method, path) in [("DELETE", "/v1/groups/team"), ("GET", "/v1/groups/team"), ("GET", "/v1/groups/team/members")] {
                let gone = try await server.rest(method, path)
                #expect(gone.status == 404 && gone.code == "group.notFound", "\(method) \(path)")
            }
            let member = try await server.rest("POST", changes, body: #"{"by":"carol","action":"add","accounts":["erin"]}"#)
            #expect(member.status == 404 && member.code == "group.notFound")
            let reused = try await server.rest("POST", "/v1/groups", body: #"{"group":"team","owner":"bob"}"#)
            #expect(reused.status == 409 && reused.code == "group.alreadyExists")
            // The owner's own dismissal is idempotent on clientId: a retry whose answer was lost gets the same entry.
            _ = try await call(server, "POST", "/v1/groups", #"{"group":"crew","owner":"bob","members":["dave"]}"#, expect: 201, as: SendAck.self)
            let dismiss = #"{"by":"bob","action":"dismiss","clientId":"end-of-crew"}"#
            let ended = try await call(server, "POST", "/v1/groups/crew/changes", dismiss, as: SendAck.self)
            let retried = try await call(server, "POST", "/v1/groups/crew/changes", dismiss, as: SendAck.self)
            #expect(retried.duplicate && retried.message.id == ended.message.id && !ended.duplicate)
            let other = try await server.rest("POST", "/v1/groups/crew/changes", body: #"{"by":"bob","action":"dismiss","clientId":"again"}"#)
            #expect(other.status == 404 && other.code == "group.notFound")
        }
    }

    @Test("receipts: counts and paged lists of any group message, the wire's cursor rules, reads for members", arguments: ServerBackend.available)
    func receipts(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol", "dave")
            _ = try await call(server, "POST", "/v1/groups", #"{"group":"team","owner":"alice","members":["bob","carol","dave"]}"#, expect: 201, as: SendAck.self)
            let conversation = ConversationID.group("team")
            let asked = try await call(
                server, "POST", "/v1/conversations/\(conversation)/messages",
                #"{"from":"alice","clientId":"a1","body":"lunch?","needsReadReceipt":true}"#, as: SendAck.self
            ).message
            let plain = try await call(
                server, "POST", "/v1/conversations/\(conversation)/messages",
                #"{"from":"bob","clientId":"b1","body":"no receipts"}"#, as: SendAck.self
            ).message
            // bob reads on his device, carol through the app's backend.
            let bob = try await server.connectedClient("bob")
            try await bob.markRead(asked.id, in: conversation)
            #expect(try await server.rest("POST", "/v1/conversations/\(conversation)/reads", body: #"{"accounts":["carol"],"seq":\#(asked.seq.rawValue)}"#).status == 204)

            let counts = try await call(
                server, "POST", "/v1/conversations/\(conversation)/receipt-counts",
                #"{"messageIds":["\#(asked.id)"]}"#, as: ReceiptCountsAck.self
            )
            #expect(counts.counts.map { [$0.readCount, $0.unreadCount] } == [[2, 1]])
            let notAsked = try await server.rest(
                "POST", "/v1/conversations/\(conversation)/receipt-counts", body: #"{"messageIds":["\#(plain.id)"]}"#
            )
            #expect(notAsked.status == 400 && notAsked.code == "receipt.notRequested")

            let lists = "/v1/conversations/\(conversation)/messages/\(asked.id)/receipts"
            let read = try await call(server, "GET", "\(lists)/read?limit=1", as: ReceiptListAck.self)
            #expect(read.total == 2 && read.entries.count == 1)
            let cursor = try #require(read.nextCursor)
            let rest = try await call(server, "GET", "\(lists)/read?limit=1&cursor=\(cursor)", as: ReceiptListAck.self)
            #expect(Set((read.entries + rest.entries).map(\.account)) == ["bob", "carol"] && rest.nextCursor == nil)
            let unread = try await call(server, "GET", "\(lists)/unread", as: ReceiptListAck.self)
            #expect(unread.entries.map(\.account) == ["dave"] && unread.total == 1)
            let filtered = try await call(server, "GET", "\(lists)/read?accounts=carol,dave", as: ReceiptListAck.self)
            #expect(filtered.entries.map(\.account) == ["carol"] && filtered.total == 1)
            // A cursor pages the list it came from only.
            let foreign = try await server.rest("GET", "\(lists)/unread?cursor=\(cursor)")
            #expect(foreign.status == 400 && foreign.code == "request.invalidArgument")
            let badList = try await server.rest("GET", "\(lists)/everyone")
            #expect(badList.status == 400 && badList.code == "request.invalidArgument")
        }
    }

    @Test(
        "every operation of the document refuses a request without the app secret, and one with a body that is not JSON",
        arguments: ServerBackend.available
    )
    func everyOperationRefusesBadRequests(backend: ServerBackend) async throws {
        // One refused credential per operation, from one address: more than the throttle's 60 a minute (past it the
        // refusal is auth.throttled, which CredentialTests checks).
        try await withTestServer(on: backend, configure: { $0.tokens.failedConnectsPerMinutePerAddress = 1000 }) { server in
            let (status, data) = try await server.restResponse("GET", "/v1/openapi.yaml", secret: false)
            #expect(status == 200)
            // The served document is the file the handlers are generated from.
            let source = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Sources/CourierAPI/openapi.yaml")
            #expect(data == (try Data(contentsOf: source)))
            let operations = Self.operations(in: String(decoding: data, as: UTF8.self))
            #expect(operations.count >= 19)
            // The media endpoints take a client token too and carry bytes, not JSON: MediaTests checks their refusals.
            for (method, template, takesBody) in operations where !template.contains("/media") {
                let path = template
                    .replacingOccurrences(of: "{conversation}", with: "d:alice:bob")
                    .replacingOccurrences(of: "{list}", with: "read")
                    .replacing(#/\{[A-Za-z]+\}/#, with: "x")
                let hasBody = ["POST", "PUT"].contains(method)
                let anonymous = try await server.rest(method, path, body: hasBody ? "{}" : nil, secret: false)
                #expect(anonymous.status == 401 && anonymous.code == "auth.invalidSecret", "\(method) \(path)")
                if takesBody {
                    let garbage = try await server.rest(method, path, body: "not json")
                    #expect(garbage.status == 400 && garbage.code == "request.invalidArgument", "\(method) \(path)")
                }
            }
        }
    }

    /// `(METHOD, /path/{template}, takes a body)` for every operation in the document (its `paths:` block, read line
    /// by line).
    static func operations(in document: String) -> [(method: String, path: String, body: Bool)] {
        var operations: [(method: String, path: String, body: Bool)] = []
        var path: String?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  /") && line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("components:") {
                break
            } else if let path, let method = ["get", "put", "post", "delete", "patch"].first(where: { line == "    \($0):" }) {
                operations.append((method.uppercased(), path, false))
            } else if line == "      requestBody:", !operations.isEmpty {
                operations[operations.count - 1].body = true
            }
        }
        return operations
    }
}
