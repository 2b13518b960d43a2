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

/// Account profiles (ADR 0053), with real SDK clients against a real server on both backends and
/// across two nodes: set by the account or the app's backend, told to its devices and its contacts' (live, after a
/// reconnect, on a new install) and to nobody else, shown on the conversation list and beside messages.
@Suite("Account profiles", .timeLimit(.minutes(5)))
struct AccountProfileTests {
    /// The first profile change of `account` that `events` tells.
    func changed(_ events: AsyncStream<CourierEvent>, of account: AccountID) async throws -> AccountProfile {
        try await events.first { $0.changedProfile.flatMap { $0.account == account ? $0 : nil } }
    }

    @Test(
        "a profile reaches the account's devices and its contacts', live and after a reconnect; nobody else's",
        arguments: ServerBackend.available
    )
    func toContacts(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol", "dave", "erin")
            let alice = try await server.connectedClient("alice")
            let direct = ConversationID.direct("alice", "bob")
            let team = ConversationID.group("team")
            _ = try await alice.send("hi", to: direct).stored()
            _ = try await alice.createGroup("team", members: ["carol"])
            let greeting = try await alice.send("hello team", to: team).stored()
            let dave = try await server.connectedClient("dave")
            _ = try await dave.send("hi", to: .direct("dave", "erin")).stored()
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let tablet = try await server.connectedClient("alice", device: "tablet")
            let (bobEvents, carolEvents, daveEvents, tabletEvents) = (bob.events(), carol.events(), dave.events(), tablet.events())

            let set = try await alice.setProfile(displayName: "Alice", avatar: "https://example.com/a.png", ext: ["k": "v"])
            #expect(set.displayName == "Alice" && set.avatar == "https://example.com/a.png" && set.ext == ["k": "v"])
            #expect(try await changed(bobEvents, of: "alice") == set)
            #expect(try await changed(carolEvents, of: "alice") == set)
            #expect(try await changed(tabletEvents, of: "alice") == set)
            // Shown where a screen looks: bob's conversation list, carol's chat beside alice's message.
            let listed = try await bob.liveConversations().first { list in
                list.first { $0.id == direct }?.peerProfile.flatMap { $0 == set ? $0 : nil }
            }
            #expect(listed == set)
            let beside = try await carol.liveMessages(in: team).first { items in
                items.lazy.compactMap { item -> AccountProfile? in
                    guard item.message?.id == greeting.id else { return nil }
                    return item.senderProfile == set ? set : nil
                }.first
            }
            #expect(beside == set)
            // And in the group's member list: names, not ids (a member who never set a profile has none).
            let page = try await carol.members(of: team)
            #expect(page.members.first { $0.account == "alice" }?.profile == set)
            #expect(page.members.first { $0.account == "carol" }.map { $0.profile == nil } == true)
            // Dave shares no conversation with alice: the first profile he hears of is erin's, set after alice's.
            let erin = try await server.connectedClient("erin")
            let erins = try await erin.setProfile(displayName: "Erin")
            #expect(try await daveEvents.first { $0.changedProfile } == erins)
            #expect(try await dave.profile(of: "alice") == nil)
            // Any account's profile may be fetched by id.
            #expect(try await dave.fetchProfiles(of: ["alice", "nobody"]) == [set])
            #expect(try await dave.profile(of: "alice") == set)

            // Bad fields are refused and nothing changes.
            await #expect(throws: CourierError.self) { try await alice.setProfile(displayName: String(repeating: "n", count: 101)) }
            await #expect(throws: CourierError.self) { try await alice.setProfile() }

            // While carol is away, alice changes her name and clears her avatar; the rest stays.
            await carol.disconnect()
            let renamed = try await alice.setProfile(displayName: "Alice B", avatar: "")
            #expect(renamed.displayName == "Alice B" && renamed.avatar == nil && renamed.ext == ["k": "v"])
            #expect(renamed.version > set.version)
            try await carol.connect(account: "carol", token: try await server.token(for: "carol"))
            #expect(try await carol.profile(of: "alice") == renamed)
            // A new install has its contacts' profiles once connected.
            let laptop = try await server.connectedClient("bob", device: "laptop")
            #expect(try await laptop.profile(of: "alice") == renamed)
        }
    }

    @Test(
        "a new contact's profile, set before they shared a conversation, reaches the device with their first message",
        arguments: ServerBackend.available
    )
    func newContact(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "frank")
            let alice = try await server.connectedClient("alice")
            let set = try await alice.setProfile(displayName: "Alice")
            let frank = try await server.connectedClient("frank")
            let events = frank.events()
            #expect(try await frank.profile(of: "alice") == nil)
            let hello = try await alice.send("hello", to: .direct("alice", "frank")).stored()
            #expect(try await changed(events, of: "alice") == set)
            let shown = try await frank.liveMessages(in: .direct("alice", "frank")).first { items in
                items.lazy.compactMap { item -> AccountProfile? in
                    guard case .message(let message) = item, message.id == hello.id else { return nil }
                    return message.senderProfile
                }.first
            }
            #expect(shown == set)
        }
    }

    @Test(
        "an avatar uploaded as the account's own file is fetched by any account; only the account's devices upload it",
        arguments: ServerBackend.available
    )
    func avatarFile(backend: ServerBackend) async throws {
        let folder = try TemporaryFolder()
        let media: (inout CourierServerConfiguration) -> Void = { configuration in
            configuration.media = .init(place: .folder(folder.path), maxBytes: 64 * 1024, types: ["image/*"])
        }
        try await withTestServer(on: backend, configure: media) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
            let file = FileManager.default.temporaryDirectory.appending(path: "avatar-\(UUID().uuidString).png")
            try bytes.write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let avatar = try await alice.uploadAvatar(Attachment(url: file, mimeType: "image/png"))
            try await alice.setProfile(avatar: avatar)
            // Bob shares no conversation with alice, and fetches her avatar all the same.
            let bob = try await server.connectedClient("bob")
            let url = try #require(URL(string: avatar))
            #expect(try await bob.mediaData(at: url) == bytes)
            // Bob's token uploads no file of alice's.
            let bobsToken = try await server.token(for: "bob")
            var request = URLRequest(url: server.httpURL.appending(path: "/v1/accounts/alice/media"))
            request.httpMethod = "POST"
            request.setValue("Bearer \(bobsToken)", forHTTPHeaderField: "Authorization")
            request.setValue("image/png", forHTTPHeaderField: "Content-Type")
            let (_, response) = try await URLSession.shared.upload(for: request, from: bytes)
            #expect((response as? HTTPURLResponse)?.statusCode == 400)
        }
    }

    @Test("the app's backend sets one profile or many at once; all or nothing", arguments: ServerBackend.available)
    func fromTheBackend(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.send("hi", to: .direct("alice", "bob")).stored()
            _ = try await alice.send("hi", to: .direct("alice", "carol")).stored()
            let events = alice.events()

            let (status, body) = try await server.restResponse(
                "PUT", "/v1/accounts/bob/profile", body: #"{"displayName":"Bob","ext":{"team":"blue"}}"#
            )
            #expect(status == 200)
            let bob = try JSONDecoder().decode(AccountProfile.self, from: body)
            #expect(bob.displayName == "Bob" && bob.ext == ["team": "blue"])
            #expect(try await changed(events, of: "bob") == bob)
            let (_, read) = try await server.restResponse("GET", "/v1/accounts/bob/profile")
            #expect(try JSONDecoder().decode(AccountProfile.self, from: read) == bob)
            #expect(try await server.rest("GET", "/v1/accounts/nobody/profile").status == 404)
            #expect(try await server.rest("PUT", "/v1/accounts/bob/profile", body: "{}").status == 400)

            // One account that is not registered: nothing of the call is written.
            let refused = try await server.rest(
                "POST", "/v1/account-profiles",
                body: #"{"profiles":[{"account":"bob","displayName":"Not written"},{"account":"nobody","displayName":"X"}]}"#
            )
            #expect(refused.status == 404 && refused.code == "account.notFound")
            let twice = try await server.rest(
                "POST", "/v1/account-profiles",
                body: #"{"profiles":[{"account":"bob","displayName":"One"},{"account":"bob","displayName":"Two"}]}"#
            )
            #expect(twice.status == 400)
            let (_, unchanged) = try await server.restResponse("GET", "/v1/accounts/bob/profile")
            #expect(try JSONDecoder().decode(AccountProfile.self, from: unchanged) == bob)

            let (bulkStatus, bulkBody) = try await server.restResponse(
                "POST", "/v1/account-profiles",
                body: #"{"profiles":[{"account":"bob","avatar":"https://example.com/b.png"},{"account":"carol","displayName":"Carol"}]}"#
            )
            #expect(bulkStatus == 200)
            struct Listed: Decodable { let profiles: [AccountProfile] }
            let bulk = try JSONDecoder().decode(Listed.self, from: bulkBody).profiles
            #expect(bulk.map(\.account) == ["bob", "carol"])
            #expect(bulk[0].displayName == "Bob" && bulk[0].avatar == "https://example.com/b.png")
            let seen = try await events.collect(2) { $0.changedProfile }
            #expect(Set(seen) == Set(bulk))
        }
    }

    @Test("the changes since a cursor come in pages, each once, and the cursor then holds only what changed after it", arguments: ServerBackend.available)
    func pagedSinceCursor(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol", "dave", "erin")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.createGroup("team", members: ["bob", "carol", "dave"])
            for account: AccountID in ["bob", "carol", "dave", "erin"] {
                #expect(try await server.rest("PUT", "/v1/accounts/\(account)/profile", body: #"{"displayName":"\#(account)"}"#).status == 200)
            }
            try await server.withRawConnection { wire in
                _ = try await wire.connect(as: "alice", server: server)
                func page(_ since: String?, _ id: String) async throws -> AccountProfilesAck {
                    let answer = try await wire.request(.accountProfiles(RequestID(rawValue: id), AccountProfilesRequest(since: since, limit: 2)))
                    guard case .ack(_, .accountProfiles(let ack))? = answer else {
                        struct Unexpected: Error { let answer: ServerFrame? }
                        throw Unexpected(answer: answer)
                    }
                    return ack
                }
                // Erin shares no conversation with alice: her profile is not among the changes.
                let first = try await page(nil, "p1")
                #expect(first.hasMore && first.profiles.count == 2)
                let second = try await page(first.cursor, "p2")
                #expect(!second.hasMore)
                #expect((first.profiles + second.profiles).map(\.account) == ["bob", "carol", "dave"])
                // Nothing new after the cursor. (PostgreSQL may send a profile again when a transaction was running as
                // the cursor was taken: a device keeps the highest version.)
                let seen = Set(first.profiles + second.profiles)
                #expect(Set(try await page(second.cursor, "p3").profiles).isSubset(of: seen))
                #expect(try await server.rest("PUT", "/v1/accounts/carol/profile", body: #"{"displayName":"Carol"}"#).status == 200)
                let after = try await page(second.cursor, "p4")
                #expect(after.profiles.filter { !seen.contains($0) }.map(\.displayName) == ["Carol"])
                // A cursor that was not handed out is refused; the connection stays up.
                let bad = try await wire.request(.accountProfiles("p5", AccountProfilesRequest(since: "not-a-cursor")))
                guard case .error(_, let error)? = bad else {
                    Issue.record("a bad cursor was not refused: \(String(describing: bad))")
                    return
                }
                #expect(error.code == .invalidArgument)
                guard case .ack? = try await wire.request(.ping("ping")) else {
                    Issue.record("the connection did not answer a ping after the refusal")
                    return
                }
            }
        }
    }

    @Test("profiles come with an import, told to nobody: a contact's device has them on its next connect", arguments: ServerBackend.available)
    func imported(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let chunk = [
                #"{"kind":"account","id":"alice","createdAt":1577836800000,"displayName":"Alice","ext":{"title":"CTO"}}"#,
                #"{"kind":"account","id":"bob","createdAt":1577836800000}"#,
                #"{"kind":"message","id":"m1","from":"alice","to":"bob","time":1577838000000,"body":"hello"}"#,
            ].joined(separator: "\n")
            let (status, body) = try await server.restResponse(
                "POST", "/v1/import", body: chunk, contentType: "application/x-ndjson"
            )
            #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
            let bob = try await server.connectedClient("bob")
            let alice = try await bob.profile(of: "alice")
            #expect(alice?.displayName == "Alice" && alice?.ext == ["title": "CTO"])
            let own = try await bob.profile(of: "bob")
            #expect(own?.displayName == nil && own?.ext == nil && own?.version == 0, "bob's line set no profile")
            // A field past its limit stops the import at that line, as a live change is refused.
            let long = String(repeating: "n", count: 101)
            let (refused, _) = try await server.restResponse(
                "POST", "/v1/import", body: #"{"kind":"account","id":"carol","displayName":"\#(long)"}"#,
                contentType: "application/x-ndjson"
            )
            #expect(refused == 400)
        }
    }

    @Test(
        "across two nodes: a profile set on one node reaches a contact's device on the other",
        .enabled(if: PostgresTestDatabase.isAvailable)
    )
    func acrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("alice", "bob")
                let alice = try await nodeA.server.connectedClient("alice")
                _ = try await alice.send("hi", to: .direct("alice", "bob")).stored()
                let bob = try await nodeB.server.connectedClient("bob")
                let events = bob.events()
                let set = try await alice.setProfile(displayName: "Alice")
                #expect(try await changed(events, of: "alice") == set)
            }
        }
    }
}
