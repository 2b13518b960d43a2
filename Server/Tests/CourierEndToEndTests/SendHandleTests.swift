// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// A send returns once the message is queued, with a handle to follow it: offline it neither blocks nor throws (so
/// "retry on error" never queues a message twice), the handle's `stored()` returns the message once the server has
/// it, and a message that has not gone out can be taken back — real SDK clients against a real server.
@Suite("Send handles", .timeLimit(.minutes(3)))
struct SendHandleTests {
    @Test("an offline send returns once queued, without an error; it goes out once on the next connection")
    func offlineSendReturnsQueued() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            // A short request timeout: a send that waited for the server would fail with timedOut here.
            let alice = try await server.connectedClient("alice") { $0.requestTimeout = .milliseconds(100) }
            await alice.disconnect()

            let sending = try await alice.send("written in a tunnel", to: direct)
            #expect(try await alice.pendingMessages(in: direct).map(\.clientID) == [sending.clientID])
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).isEmpty)

            // Someone waits for it while the device is still offline; it connects afterwards.
            let waiting = Task { try await sending.stored() }
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let stored = try await waiting.value
            #expect(stored.clientID == sending.clientID && stored.body == "written in a tunnel" && stored.seq > .zero)
            // Asked again once stored: the same message, at once.
            #expect(try await sending.stored().id == stored.id)
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).map(\.body) == ["written in a tunnel"])
            #expect(try await alice.pendingMessages(in: direct).isEmpty)
        }
    }

    @Test("a message taken back before it goes out is never sent; one that went out cannot be taken back; a refusal comes from stored()")
    func takenBackBeforeItGoes() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            await alice.disconnect()

            let regretted = try await alice.send("never mind", to: direct)
            let kept = try await alice.send("this one", to: direct)
            #expect(try await regretted.cancel())
            await #expect(throws: CourierError.cancelled) { try await regretted.stored() }
            #expect(try await alice.pendingMessages(in: direct).map(\.clientID) == [kept.clientID])

            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            let stored = try await kept.stored()
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).map(\.body) == ["this one"])
            #expect(try await kept.cancel() == false)
            #expect(try await alice.messages(in: direct).map(\.id) == [stored.id])

            // The server refuses a group the account is not in: send returns (the device cannot tell), stored() throws.
            let bob = try await server.connectedClient("bob")
            try await bob.createGroup("others", members: ["carol"])
            let refused = try await alice.send("let me in", to: .group("others"))
            await #expect(throws: CourierError.self) { try await refused.stored() }
            #expect(try await alice.pendingMessages(in: .group("others")).map(\.status) == [.failed])
        }
    }

    @Test("a client id taken back can be sent again; after a relaunch, a text queued by the earlier run cannot be taken back (it may have gone out)")
    func takenBackThenSentAgain() async throws {
        let folder = try TemporaryFolder()
        let store = CourierClient.Configuration.StoreLocation.file(URL(fileURLWithPath: folder.path + "/alice.sqlite"))
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let direct = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice", store: store)
            await alice.disconnect()

            // Taken back, then sent again with the same client id: it goes out.
            #expect(try await alice.send("maybe", to: direct, clientID: "c-1").cancel())
            let again = try await alice.send("yes, this", to: direct, clientID: "c-1")
            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))
            #expect(try await again.stored().body == "yes, this")

            // Queued offline by a run that then ended: the relaunched app cannot tell whether it went out.
            await alice.disconnect()
            try await alice.send("from before the relaunch", to: direct, clientID: "c-2")
            let relaunched = try server.client(store: store)
            #expect(try await relaunched.sendHandle(for: "c-2", in: direct).cancel() == false)
            try await relaunched.connect(account: "alice", token: try await server.token(for: "alice"))
            let stored = try await relaunched.sendHandle(for: "c-2", in: direct).stored()
            #expect(stored.body == "from before the relaunch")
            #expect(try await server.store.messages(in: direct, after: .zero, limit: 10).map(\.body) == ["yes, this", "from before the relaunch"])
        }
    }
}
