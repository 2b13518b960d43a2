// Courier — Apache-2.0
import CourierSDK
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Local full-text search over the SDK's cache: what a device holds, found by words of its text, offline;
/// never a recalled message.
@Suite("Local search", .timeLimit(.minutes(5)))
struct LocalSearchTests {
    @Test("a word finds the messages holding it (as a prefix, without case or accents), newest first; a recalled one is not found")
    func search() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let events = bob.events()
            let direct = ConversationID.direct("alice", "bob")
            let lunch = try await alice.send("Lunch meeting at the Café, noon", to: direct).stored()
            let later = try await alice.send("Meet me later?", to: direct).stored()
            _ = try await alice.send(.custom(type: "location", json: #"{"name":"meeting point"}"#), to: direct).stored()
            _ = try await alice.createGroup("team", members: ["bob"])
            let inGroup = try await alice.send("Team meeting moved", to: .group("team")).stored()
            _ = try await events.first { $0.receivedMessage?.id == inGroup.id ? true : nil }

            #expect(try await bob.searchMessages("meet").map(\.id) == [inGroup.id, later.id, lunch.id])
            #expect(try await bob.searchMessages("MEET", in: direct).map(\.id) == [later.id, lunch.id])
            #expect(try await bob.searchMessages("cafe noon").map(\.id) == [lunch.id])
            #expect(try await bob.searchMessages("café \"OR\" dinner").isEmpty, "every word must match; quotes are no syntax")
            #expect(try await bob.searchMessages("point").isEmpty, "an app-defined message's JSON is not searched")
            #expect(try await bob.searchMessages("  ?! ").isEmpty)

            try await alice.recall(later.id, in: direct)
            _ = try await events.first { event -> Bool? in
                if case .messageRecalled(let notice) = event, notice.messageID == later.id { return true }
                return nil
            }
            #expect(try await bob.searchMessages("meet", in: direct).map(\.id) == [lunch.id])
            #expect(try await alice.searchMessages("later").isEmpty, "the sender's device too")
        }
    }
}
