// Courier — Apache-2.0
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Moderation through the REST API: list and search accounts, deactivate and reactivate one, revoke its
/// tokens. What a device sees is checked on raw connections: the error frame, then the close; a refused connect.
@Suite("Moderation", .timeLimit(.minutes(5)))
struct ModerationTests {
    func connect(_ connection: RawConnection, _ account: AccountID, token: String) async throws -> ServerFrame? {
        try await connection.request(.connect("c", ConnectRequest(token: token, account: account, device: "raw")))
    }

    /// The code of the error frame without a request id that came before the server closed the connection (the
    /// frames end when it closes).
    func noticeThenClose(_ connection: RawConnection) async throws -> ErrorCode? {
        var code: ErrorCode?
        while let frame = try await connection.next() {
            if case .error(nil, let error) = frame { code = error.code }
        }
        return code
    }

    struct Status: Decodable {
        let id: String
        let deactivatedAt: Int64?
        let tokensRevokedAt: Int64?
    }

    @Test("deactivate closes the account's session and refuses its connects; its messages stay; reactivate lets it back", arguments: ServerBackend.available)
    func deactivate(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            #expect(try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: #"{"from":"alice","clientId":"a1","body":"hi"}"#).status == 200)
            let aliceToken = try await server.token(for: "alice")
            let ended = try await server.withRawConnection { connection in
                guard case .ack = try await connect(connection, "alice", token: aliceToken) else { return nil as ErrorCode? }
                let (status, body) = try await server.restResponse("POST", "/v1/accounts/alice/deactivate")
                #expect(status == 200)
                #expect(try JSONDecoder().decode(Status.self, from: body).deactivatedAt != nil)
                return try await noticeThenClose(connection)
            }
            #expect(ended == .authAccountDeactivated)
            let refused = try await server.withRawConnection { try await connect($0, "alice", token: aliceToken) }
            guard case .error(_, let error) = refused else { Issue.record("connected: \(String(describing: refused))"); return }
            #expect(error.code == .authAccountDeactivated)
            // Its messages stay, and others may still message it.
            let (_, history) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages?account=bob")
            #expect(try JSONDecoder().decode(HistoryAck.self, from: history).messages.map(\.body) == ["hi"])
            #expect(try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: #"{"from":"bob","clientId":"b1","body":"there?"}"#).status == 200)
            // The app can neither send as it nor mint it a token, and nothing is written.
            let sendAs = try await server.rest("POST", "/v1/conversations/\(direct)/messages", body: #"{"from":"alice","clientId":"a2","body":"still me"}"#)
            #expect(sendAs.status == 409 && sendAs.code == "account.deactivated")
            let (_, after) = try await server.restResponse("GET", "/v1/conversations/\(direct)/messages?account=bob")
            #expect(try JSONDecoder().decode(HistoryAck.self, from: after).messages.map(\.body) == ["hi", "there?"])
            let mint = try await server.rest("POST", "/v1/accounts/alice/tokens", body: "{}")
            #expect(mint.status == 409 && mint.code == "account.deactivated")

            #expect(try await server.rest("POST", "/v1/accounts/alice/reactivate").status == 200)
            #expect(try await server.rest("POST", "/v1/accounts/alice/tokens", body: "{}").status == 201)
            let back = try await server.withRawConnection { try await connect($0, "alice", token: aliceToken) }
            guard case .ack = back else { Issue.record("refused after reactivation: \(String(describing: back))"); return }
            #expect(try await server.rest("POST", "/v1/accounts/nobody/deactivate").code == "account.notFound")
        }
    }

    @Test("revoking tokens closes sessions opened with older ones and refuses them; a token minted after works")
    func revoke() async throws {
        try await withTestServer { server in
            try await server.register("alice")
            let old = try await server.token(for: "alice", age: 5)
            let ended = try await server.withRawConnection { connection in
                guard case .ack = try await connect(connection, "alice", token: old) else { return nil as ErrorCode? }
                let (status, body) = try await server.restResponse("POST", "/v1/accounts/alice/revoke-tokens")
                #expect(status == 200)
                #expect(try JSONDecoder().decode(Status.self, from: body).tokensRevokedAt != nil)
                return try await noticeThenClose(connection)
            }
            #expect(ended == .authTokenRevoked)
            let refused = try await server.withRawConnection { try await connect($0, "alice", token: old) }
            guard case .error(_, let error) = refused else { Issue.record("connected: \(String(describing: refused))"); return }
            #expect(error.code == .authTokenRevoked)
            // Minted now, through the REST API as the app's backend would: it connects.
            let (_, minted) = try await server.restResponse("POST", "/v1/accounts/alice/tokens", body: "{}")
            struct Minted: Decodable { let token: String }
            let fresh = try JSONDecoder().decode(Minted.self, from: minted).token
            let accepted = try await server.withRawConnection { try await connect($0, "alice", token: fresh) }
            guard case .ack = accepted else { Issue.record("refused: \(String(describing: accepted))"); return }
        }
    }

    @Test("one device is disconnected (and may come back), the others stay; the node lists the devices it holds")
    func disconnectDevice() async throws {
        try await withTestServer { server in
            try await server.register("alice")
            let aliceToken = try await server.token(for: "alice")
            struct Devices: Decodable { struct Device: Decodable { let device: String }; let devices: [Device] }
            @Sendable func devices() async throws -> [String] {
                let (_, body) = try await server.restResponse("GET", "/v1/accounts/alice/devices")
                return try JSONDecoder().decode(Devices.self, from: body).devices.map(\.device)
            }
            try await server.withRawConnection { tablet in
                guard case .ack = try await tablet.request(
                    .connect("t", ConnectRequest(token: aliceToken, account: "alice", device: "tablet"))
                ) else { Issue.record("tablet refused"); return }
                let ended = try await server.withRawConnection { phone -> Bool in
                    guard case .ack = try await connect(phone, "alice", token: aliceToken) else { return false }
                    #expect(try await devices() == ["raw", "tablet"])
                    #expect(try await server.rest("POST", "/v1/accounts/alice/devices/raw/disconnect").status == 204)
                    return try await noticeThenClose(phone) == nil  // closed, with no error frame before
                }
                #expect(ended)
                #expect(try await devices() == ["tablet"])
                // The tablet is still connected and answered.
                guard case .ack = try await tablet.request(.ping("p")) else { Issue.record("the tablet was cut too"); return }
                // The kicked device may connect again.
                let again = try await server.withRawConnection { try await connect($0, "alice", token: aliceToken) }
                guard case .ack = again else { Issue.record("refused after a kick: \(String(describing: again))"); return }
            }
            #expect(try await server.rest("POST", "/v1/accounts/nobody/devices/raw/disconnect").code == "account.notFound")
        }
    }

    @Test("accounts are listed in id order, by prefix, a page at a time, with their status", arguments: ServerBackend.available)
    func list(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("ann", "anna", "bob", "annie", "carl")
            _ = try await server.rest("POST", "/v1/accounts/anna/deactivate")
            struct Page: Decodable { let accounts: [Status]; let nextCursor: String? }
            func page(_ query: String) async throws -> Page {
                let (status, body) = try await server.restResponse("GET", "/v1/accounts?\(query)")
                #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
                return try JSONDecoder().decode(Page.self, from: body)
            }
            let first = try await page("prefix=ann&limit=2")
            #expect(first.accounts.map(\.id) == ["ann", "anna"] && first.nextCursor == "anna")
            #expect(first.accounts[1].deactivatedAt != nil && first.accounts[0].deactivatedAt == nil)
            let second = try await page("prefix=ann&limit=2&cursor=anna")
            #expect(second.accounts.map(\.id) == ["annie"] && second.nextCursor == nil)
            #expect(try await page("limit=10").accounts.map(\.id) == ["ann", "anna", "annie", "bob", "carl"])
            #expect(try await server.rest("GET", "/v1/accounts?limit=1001").code == "request.invalidArgument")
        }
    }

    @Test("on PostgreSQL, a deactivation through one node closes the account's session on the other", .enabled(if: ServerBackend.available.count > 1))
    func acrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let nodeA = try await TestNode.start(backend: .postgres(url: url))
            let nodeB = try await TestNode.start(backend: .postgres(url: url))
            do {
                try await nodeA.server.register("alice")
                #expect(try await PostgresTestDatabase.waitForListener(ofDatabaseAt: url, count: 2))
                let aliceToken = try await nodeB.server.token(for: "alice")
                // A device disconnected through node A, connected to node B: node B ends its session.
                let kicked = try await nodeB.server.withRawConnection { connection -> Bool in
                    guard case .ack = try await connect(connection, "alice", token: aliceToken) else { return false }
                    #expect(try await nodeA.server.rest("POST", "/v1/accounts/alice/devices/raw/disconnect").status == 204)
                    return try await noticeThenClose(connection) == nil
                }
                #expect(kicked)
                let ended = try await nodeB.server.withRawConnection { connection in
                    guard case .ack = try await connect(connection, "alice", token: aliceToken) else { return nil as ErrorCode? }
                    #expect(try await nodeA.server.rest("POST", "/v1/accounts/alice/deactivate").status == 200)
                    return try await noticeThenClose(connection)
                }
                #expect(ended == .authAccountDeactivated)
            } catch {
                await nodeA.stop()
                await nodeB.stop()
                throw error
            }
            await nodeA.stop()
            await nodeB.stop()
        }
    }

    @Test("conversations are listed by member, kind and prefix, a page at a time; groups by prefix; a dismissed group is not", arguments: ServerBackend.available)
    func conversationsAndGroups(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            for group in ["team", "teal", "zoo"] {
                #expect(try await server.rest("POST", "/v1/groups", body: #"{"group":"\#(group)","owner":"alice","members":["bob"]}"#).status == 201)
            }
            #expect(try await server.rest("DELETE", "/v1/groups/zoo").status == 200)
            for to in ["d:alice:bob", "d:bob:carol"] {
                #expect(try await server.rest("POST", "/v1/conversations/\(to)/messages", body: #"{"from":"bob","clientId":"\#(to)","body":"hi"}"#).status == 200)
            }
            struct Conversation: Decodable { let id: String; let kind: String; let memberCount: Int; let lastSeq: Int64 }
            struct Page: Decodable { let conversations: [Conversation]; let nextCursor: String? }
            func page(_ query: String) async throws -> Page {
                let (status, body) = try await server.restResponse("GET", "/v1/conversations?\(query)")
                #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
                return try JSONDecoder().decode(Page.self, from: body)
            }
            let alices = try await page("member=alice")
            #expect(alices.conversations.map(\.id) == ["d:alice:bob", "g:teal", "g:team"] && alices.nextCursor == nil)
            #expect(alices.conversations.map(\.memberCount) == [2, 2, 2])
            #expect(alices.conversations.map(\.kind) == ["direct", "group", "group"])
            let first = try await page("member=bob&limit=2")
            #expect(first.conversations.map(\.id) == ["d:alice:bob", "d:bob:carol"] && first.nextCursor == "d:bob:carol")
            let second = try await page("member=bob&limit=2&cursor=d:bob:carol")
            #expect(second.conversations.map(\.id) == ["g:teal", "g:team"] && second.nextCursor == nil)
            #expect(try await page("kind=direct&member=carol").conversations.map(\.id) == ["d:bob:carol"])
            #expect(try await page("prefix=g:tea").conversations.map(\.id) == ["g:teal", "g:team"])

            struct Groups: Decodable { struct Group: Decodable { let id: String; let conversation: String }; let groups: [Group]; let nextCursor: String? }
            let (_, body) = try await server.restResponse("GET", "/v1/groups?limit=1")
            let groups = try JSONDecoder().decode(Groups.self, from: body)
            #expect(groups.groups.map(\.id) == ["teal"] && groups.nextCursor == "teal")
            let (_, rest) = try await server.restResponse("GET", "/v1/groups?cursor=teal")
            #expect(try JSONDecoder().decode(Groups.self, from: rest).groups.map(\.id) == ["team"])
            let (_, prefixed) = try await server.restResponse("GET", "/v1/groups?prefix=z")
            #expect(try JSONDecoder().decode(Groups.self, from: prefixed).groups.isEmpty)
            #expect(try await server.rest("GET", "/v1/conversations?limit=0").code == "request.invalidArgument")
            #expect(try await server.rest("GET", "/v1/groups?prefix=no%20t").code == "request.invalidArgument")
        }
    }

    @Test("on PostgreSQL, any node lists an account's devices on every node; a gone node's drop out", .enabled(if: ServerBackend.available.count > 1))
    func devicesAcrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let nodeA = try await TestNode.start(backend: .postgres(url: url))
            let nodeB = try await TestNode.start(backend: .postgres(url: url))
            let nodeBID = try #require(nodeB.server.store as? any PresenceStore).nodeID
            struct Devices: Decodable { struct Device: Decodable, Equatable { let device: String; let node: String }; let devices: [Device] }
            @Sendable func devices(through node: TestNode) async throws -> [Devices.Device] {
                let (_, body) = try await node.server.restResponse("GET", "/v1/accounts/alice/devices")
                return try JSONDecoder().decode(Devices.self, from: body).devices
            }
            /// Asks again until `expected` is the answer, for at most 10 s (ends are recorded behind the connection).
            @Sendable func settles(_ node: TestNode, on expected: [Devices.Device]) async throws -> Bool {
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline {
                    if try await devices(through: node) == expected { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return false
            }
            do {
                try await nodeA.server.register("alice")
                // A row of a node that is gone (no connection of its name) is never listed.
                try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                    try await session.execute(
                        "INSERT INTO connected_device VALUES ('gone-node', 1, 'alice', 'ghost', 0)"
                    )
                }
                let aliceToken = try await nodeB.server.token(for: "alice")
                let phone = Devices.Device(device: "raw", node: nodeBID)
                try await nodeB.server.withRawConnection { connection in
                    guard case .ack = try await connect(connection, "alice", token: aliceToken) else {
                        Issue.record("refused")
                        return
                    }
                    // Recorded in the connect's own transaction: listed through both nodes once the connect is answered.
                    #expect(try await devices(through: nodeA) == [phone])
                    #expect(try await devices(through: nodeB) == [phone])
                    #expect(try await nodeA.server.rest("POST", "/v1/accounts/alice/devices/raw/disconnect").status == 204)
                    _ = try await noticeThenClose(connection)
                }
                #expect(try await settles(nodeA, on: []))
                // Node B stops with a device connected: its rows go with it.
                try await nodeB.server.withRawConnection { connection in
                    guard case .ack = try await connect(connection, "alice", token: aliceToken) else { return }
                    #expect(try await devices(through: nodeA) == [phone])
                    await nodeB.stop()
                }
                #expect(try await devices(through: nodeA) == [])
            } catch {
                await nodeA.stop()
                await nodeB.stop()
                throw error
            }
            await nodeA.stop()
        }
    }
}
