// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Reactions (ADR 0055), with real SDK clients against a real server on both backends and across two
/// nodes: counts per reaction and who reacted, paged; events to the members' devices; exact under concurrent adds and
/// removes; refused for outsiders and recalled messages, and gone with a recall.
@Suite("Reactions", .timeLimit(.minutes(5)))
struct ReactionTests {
    let crew = ConversationID.group("crew")

    static func counts(_ counts: [ReactionCount]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: counts.map { ($0.reaction, $0.count) })
    }

    @Test("members add and remove reactions: counts, yours, events, a new device's fetch, a paged list",
          arguments: ServerBackend.available)
    func countsAndEvents(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob", "carol", "dave")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            _ = try await alice.createGroup("crew", members: ["bob", "carol"])
            let message = try await alice.send("lunch at noon?", to: crew).stored()
            let events = alice.events()

            try await bob.react("👍", to: message.id, in: crew)
            try await carol.react("👍", to: message.id, in: crew)
            let after = try await carol.react("❤️", to: message.id, in: crew)
            #expect(Self.counts(after.counts) == ["👍": 2, "❤️": 1] && after.mine == ["❤️", "👍"].sorted())
            // Adding one you have changes nothing; removing one you do not have neither.
            let again = try await bob.react("👍", to: message.id, in: crew)
            #expect(Self.counts(again.counts) == ["👍": 2, "❤️": 1] && again.mine == ["👍"])
            _ = try await bob.removeReaction("🎉", from: message.id, in: crew)

            // The sender's device hears each change, the last with the counts as they are.
            let seen = try await events.collect(3) { $0.reactionUpdate }
            #expect(seen.map(\.account) == ["bob", "carol", "carol"])
            #expect(Self.counts(seen.last!.counts) == ["👍": 2, "❤️": 1])
            let stored = try #require(try await alice.message(message.id))
            #expect(Self.counts(stored.reactions) == ["👍": 2, "❤️": 1] && stored.myReactions.isEmpty)

            let removed = try await carol.removeReaction("👍", from: message.id, in: crew)
            #expect(Self.counts(removed.counts) == ["👍": 1, "❤️": 1] && removed.mine == ["❤️"])
            let update = try await events.first { $0.reactionUpdate }
            #expect(update.added == false && Self.counts(update.counts) == ["👍": 1, "❤️": 1])

            // A device that was not there asks for the rows it shows.
            let laptop = try await server.connectedClient("carol", device: "laptop")
            _ = try await laptop.history(in: crew)
            try await laptop.fetchReactions(for: [message.id], in: crew)
            let held = try #require(try await laptop.message(message.id))
            #expect(Self.counts(held.reactions) == ["👍": 1, "❤️": 1] && held.myReactions == ["❤️"])

            // Who reacted, a page at a time, in (reaction, account) order.
            let first = try await alice.reactionList(for: message.id, in: crew, limit: 1)
            let second = try await alice.reactionList(for: message.id, in: crew, cursor: first.nextCursor, limit: 1)
            #expect(first.nextCursor != nil && second.nextCursor == nil)
            #expect((first.entries + second.entries).map { "\($0.reaction) \($0.account)" } == ["❤️ carol", "👍 bob"])
            let hearts = try await alice.reactionList(for: message.id, in: crew, reaction: "❤️")
            #expect(hearts.entries.map(\.account) == ["carol"])

            // Outsiders and bad reactions are refused; nothing changes.
            let dave = try await server.connectedClient("dave")
            await expectCode(.conversationNotAMember) { _ = try await dave.react("👍", to: message.id, in: crew) }
            await expectCode(.invalidArgument) { _ = try await bob.react("", to: message.id, in: crew) }
            await expectCode(.invalidArgument) {
                _ = try await bob.react(String(repeating: "x", count: 65), to: message.id, in: crew)
            }

            // The app's backend reacts in a member's name and lists who reacted (REST).
            let (status, body) = try await server.restResponse(
                "POST", "/v1/conversations/\(crew.rawValue)/reactions",
                body: #"{"account":"alice","messageId":"\#(message.id)","reaction":"👀"}"#
            )
            #expect(status == 200)
            let byApp = try JSONDecoder().decode(WireReactions.self, from: body)
            #expect(byApp.mine == ["👀"] && Self.counts(byApp.counts)["👀"] == 1)
            let outsider = try await server.rest(
                "POST", "/v1/conversations/\(crew.rawValue)/reactions",
                body: #"{"account":"dave","messageId":"\#(message.id)","reaction":"👀"}"#
            )
            #expect(outsider.status == 403 && outsider.code == "conversation.notAMember")
            let (listed, listBody) = try await server.restResponse(
                "GET", "/v1/conversations/\(crew.rawValue)/messages/\(message.id)/reactions?reaction=%F0%9F%91%80"
            )
            #expect(listed == 200)
            #expect(try JSONDecoder().decode(ReactionListAck.self, from: listBody).entries.map(\.account) == ["alice"])

            // A recall takes the reactions with it; a recalled message takes none.
            try await alice.recall(message.id, in: crew)
            let gone = try await server.store.reactions(of: [message.id], in: crew, viewer: "alice")
            #expect(gone.first?.counts.isEmpty == true)
            await expectCode(.reactionMessageRecalled) { _ = try await bob.react("👍", to: message.id, in: crew) }
        }
    }

    @Test("many members adding and removing reactions at once: the count is the rows, and devices keep the newest",
          arguments: ServerBackend.available)
    func concurrentAddsAndRemoves(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            let members = (1...16).map { AccountID(rawValue: "m\($0)") }
            try await server.register("owner")
            for member in members { try await server.register(member) }
            let owner = try await server.connectedClient("owner")
            _ = try await owner.createGroup("crew", members: members)
            let message = try await owner.send("vote", to: crew).stored()
            var clients: [CourierClient] = []
            for member in members { clients.append(try await server.connectedClient(member)) }
            let events = owner.events()

            // Every member adds 👍 and 🎉 at once; the odd ones then take 👍 back, also at once.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in clients {
                    group.addTask {
                        try await client.react("👍", to: message.id, in: crew)
                        try await client.react("🎉", to: message.id, in: crew)
                    }
                }
                try await group.waitForAll()
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, client) in clients.enumerated() where index % 2 == 0 {
                    group.addTask { try await client.removeReaction("👍", from: message.id, in: crew) }
                }
                try await group.waitForAll()
            }

            let expected = ["👍": members.count / 2, "🎉": members.count]
            let final = try #require(try await server.store.reactions(of: [message.id], in: crew, viewer: "owner").first)
            #expect(Self.counts(final.counts) == expected)
            var listed: [ReactionListEntry] = []
            var cursor: String?
            repeat {
                let page = try await owner.reactionList(for: message.id, in: crew, cursor: cursor, limit: 7)
                listed += page.entries
                cursor = page.nextCursor
            } while cursor != nil
            #expect(Dictionary(grouping: listed, by: \.reaction).mapValues(\.count) == expected)
            // The sender's device hears the changes in whatever order their commits were told and keeps the newest:
            // the last change carries the final counts, whenever it arrives.
            let last = try await events.first { event in
                event.reactionUpdate.flatMap { Self.counts($0.counts) == expected ? $0 : nil }
            }
            #expect(last.myReactions.isEmpty)
            let stored = try #require(try await owner.message(message.id))
            #expect(Self.counts(stored.reactions) == expected)
        }
    }

    @Test("across two nodes: a reaction made on one node reaches a member's device on the other",
          .enabled(if: PostgresTestDatabase.isAvailable))
    func acrossNodes() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                try await nodeA.server.register("alice", "bob")
                let chat = ConversationID.direct("alice", "bob")
                let alice = try await nodeA.server.connectedClient("alice")
                let message = try await alice.send("hi", to: chat).stored()
                let bob = try await nodeB.server.connectedClient("bob")
                _ = try await bob.history(in: chat)
                let events = bob.events()
                try await alice.react("👋", to: message.id, in: chat)
                let update = try await events.first { $0.reactionUpdate }
                #expect(update.account == "alice" && Self.counts(update.counts) == ["👋": 1])
                #expect(try await bob.message(message.id)?.reactions == [ReactionCount(reaction: "👋", count: 1)])
            }
        }
    }
}

extension DecisionRaceTests {
    @Test("a reaction held while its message is recalled is refused and leaves no row", arguments: ServerBackend.available)
    func reactionRacingRecall(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .react)
        let chat = ConversationID.direct("alice", "bob")
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let message = try await alice.send("hello", to: chat).stored()
            gate.arm()
            async let reaction = outcome { try await bob.react("👍", to: message.id, in: chat) }

            // When alice recalls the message while bob's reaction waits before its transaction.
            await gate.held()
            try await alice.recall(message.id, in: chat)
            gate.release()

            // Then the reaction is refused by what its own transaction reads, and nothing of it is stored.
            let refused = await reaction
            await expectCode(.reactionMessageRecalled) { _ = try refused.get() }
            let list = try await alice.reactionList(for: message.id, in: chat)
            #expect(list.entries.isEmpty)
        }
    }
}
