// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// A group's profile (ADR 0051), with real SDK clients against a real server on both backends: set
/// by the owner and admins, refused for ordinary members, told to every member's devices in order (live, after a
/// reconnect, on a new install), fields cleared and kept as a change says.
@Suite("Group profiles", .timeLimit(.minutes(5)))
struct GroupProfileTests {
    let team = ConversationID.group("team")

    /// The first list of `client`'s conversations whose group profile `matches`.
    func profile(on client: CourierClient, _ matches: @escaping @Sendable (GroupProfile?) -> Bool) async throws
        -> GroupProfile?
    {
        let team = self.team
        return try await client.liveConversations().first { list in
            list.first { $0.id == team }.flatMap { matches($0.groupProfile) ? .some($0.groupProfile) : nil }
        }
    }

    @Test(
        "the owner and admins set a group's name, avatar, announcement and ext; every member's devices show it",
        arguments: ServerBackend.available
    )
    func setAndShown(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            _ = try await alice.createGroup("team", members: ["bob", "carol"])
            _ = try await alice.setRole(.admin, for: ["bob"], in: team)
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")

            // An admin sets it; a member's device shows it live, and the change is an entry of the log.
            let first = GroupProfile(
                name: "Team", avatar: "https://example.com/team.png", announcement: "Welcome", ext: ["color": "blue"]
            )
            let entry = try await bob.setGroupProfile(first, in: team)
            #expect(entry.groupChange?.action == .profileChanged)
            #expect(try await profile(on: carol) { $0 == first } == first)
            #expect(try await carol.messages(in: team).last?.id == entry.id)

            // An ordinary member may not; bad fields are refused before anything is written.
            await #expect {
                try await carol.setGroupProfile(GroupProfile(name: "Mine"), in: team)
            } throws: { error in
                (error as? CourierError)?.code == .groupNotPermitted
            }
            await #expect(throws: CourierError.self) {
                try await alice.setGroupProfile(GroupProfile(name: String(repeating: "n", count: 101)), in: team)
            }
            await #expect(throws: CourierError.self) { try await alice.setGroupProfile(GroupProfile(), in: team) }

            // While carol is away, the owner renames it and clears the announcement; the rest stays.
            await carol.disconnect()
            try await alice.setGroupProfile(GroupProfile(name: "Team Two", announcement: ""), in: team)
            let second = GroupProfile(name: "Team Two", avatar: first.avatar, announcement: nil, ext: first.ext)
            try await carol.connect(account: "carol", token: try await server.token(for: "carol"))
            #expect(try await profile(on: carol) { $0 == second } == second)
            // A new install has it from its first sync; so has the admin who set the first one.
            let laptop = try await server.connectedClient("carol", device: "laptop")
            #expect(try await laptop.conversations().first { $0.id == team }?.groupProfile == second)
            #expect(try await profile(on: bob) { $0 == second } == second)
            // The app's backend sets it in an admin's name (REST); an ordinary member's name is refused.
            let (status, _) = try await server.restResponse(
                "POST", "/v1/groups/team/changes",
                body: #"{"by":"bob","action":"setProfile","profile":{"announcement":"From the backend"}}"#
            )
            #expect(status == 200)
            let third = GroupProfile(name: "Team Two", avatar: first.avatar, announcement: "From the backend", ext: first.ext)
            #expect(try await profile(on: carol) { $0 == third } == third)
            let refused = try await server.rest(
                "POST", "/v1/groups/team/changes", body: #"{"by":"carol","action":"setProfile","profile":{"name":"x"}}"#
            )
            #expect(refused.code == "group.notPermitted")
            // A direct conversation has none.
            _ = try await alice.send("hi", to: .direct("alice", "carol")).stored()
            let direct = try await laptop.liveConversations().first { list in
                list.first { $0.id == .direct("alice", "carol") }
            }
            #expect(direct.groupProfile == nil)
        }
    }

    @Test("a group's profile comes with an import: a member's new install shows it", arguments: ServerBackend.available)
    func imported(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let chunk = [
                #"{"kind":"group","id":"t1","group":"team","action":"created","by":"alice","accounts":["bob"],"time":1577838000000}"#,
                #"{"kind":"group","id":"t2","group":"team","action":"profileChanged","by":"alice","profile":{"name":"Imported","ext":{"k":"v"}},"time":1577838001000}"#,
                #"{"kind":"group","id":"t3","group":"team","action":"profileChanged","by":"bob","profile":{"name":"By a member"},"time":1577838002000}"#,
            ].joined(separator: "\n")
            let (status, body) = try await server.restResponse(
                "POST", "/v1/import", body: chunk, contentType: "application/x-ndjson"
            )
            #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
            // An ordinary member's change is skipped, with the code a live one gets.
            #expect(String(decoding: body, as: UTF8.self).contains("group.notPermitted"))
            let bob = try await server.connectedClient("bob")
            let expected = GroupProfile(name: "Imported", ext: ["k": "v"])
            #expect(try await profile(on: bob) { $0 == expected } == expected)
        }
    }
}
