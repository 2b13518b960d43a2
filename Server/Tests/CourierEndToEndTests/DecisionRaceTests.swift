// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import Testing

/// Two requests about one thing at the same moment: one request is held between the checks its service
/// makes and the transaction that writes, while the other one commits. A decision that depends on stored state must
/// come out as if the held request had started after the other: it is made from facts read in its own transaction.
@Suite("Decisions made in the transaction that writes", .timeLimit(.minutes(5)))
struct DecisionRaceTests {
    @Test(
        "a reply held while its original is recalled quotes none of the recalled text",
        arguments: ServerBackend.available
    )
    func replyRacingRecall(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .send)
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            // Given alice's message, and bob replying to it.
            try await server.register("alice", "bob")
            let conversation = ConversationID.direct("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let original = try await alice.send("meet me at the old mill at 10pm", to: conversation).stored()
            gate.arm()
            async let reply = bob.send("ok", to: conversation, replyTo: original.id).stored()

            // When alice recalls the original while bob's reply waits between its checks and its append.
            await gate.held()
            _ = try await alice.recall(original.id, in: conversation)
            gate.release()

            // Then the reply is stored without the recalled text: in its ack, in history, and for a new device.
            let sent = try await reply
            #expect(sent.quote == nil)
            let fresh = try await server.connectedClient("alice", device: "new")
            let stored = try await fresh.history(in: conversation).first { $0.id == sent.id }
            #expect(stored != nil && stored?.quote == nil)
            #expect(stored?.replyTo == original.id)
        }
    }

    @Test("an admin's recall held while the admin is demoted is refused", arguments: ServerBackend.available)
    func recallRacingDemotion(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .recall)
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            // Given alice the owner, bob an admin, and carol's message.
            try await server.register("alice", "bob", "carol")
            let group = ConversationID.group("crew")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            _ = try await alice.createGroup("crew", members: ["bob", "carol"])
            _ = try await alice.setRole(.admin, for: ["bob"], in: group)
            let message = try await carol.send("hello all", to: group).stored()
            gate.arm()
            async let recall = outcome { try await bob.recall(message.id, in: group) }

            // When alice makes bob an ordinary member while his recall waits before its transaction.
            await gate.held()
            _ = try await alice.setRole(.member, for: ["bob"], in: group)
            gate.release()

            // Then the recall is refused by the role bob has when it commits, and carol's message stays.
            let refused = await recall
            await expectCode(.recallNotPermitted) { _ = try refused.get() }
            let history = try await alice.history(in: group)
            #expect(history.first { $0.id == message.id }?.body == "hello all")
        }
    }
}

extension DecisionRaceTests {
    @Test(
        "a change of view held while its account is removed from the group writes nothing and is refused",
        arguments: ServerBackend.available
    )
    func viewRacingRemoval(backend: ServerBackend) async throws {
        let gate = WriteGate(holding: .changeView)
        try await withTestServer(on: backend, configure: { $0.hooks = gate.hooks }) { server in
            // Given bob in alice's group.
            try await server.register("alice", "bob")
            let group = ConversationID.group("crew")
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            _ = try await alice.createGroup("crew", members: ["bob"])
            gate.arm()
            async let mute = outcome { try await bob.setMuted(true, in: group) }

            // When alice removes bob while his mute waits between its checks and its transaction.
            await gate.held()
            _ = try await alice.removeMembers(["bob"], from: group)
            gate.release()

            // Then the mute is refused by the membership bob has when it commits, and nothing of it is stored.
            let refused = await mute
            await expectCode(.conversationNotAMember) { _ = try refused.get() }
            #expect(try await server.store.view(of: "bob", in: group) == .none)
        }
    }
}

/// What `body` returned or threw.
func outcome<T: Sendable>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

/// Holds the first request that reaches `point` after ``arm()`` until ``release()``.
final class WriteGate: Sendable {
    private struct State {
        var armed = false
        var heldWaiters: [CheckedContinuation<Void, Never>] = []
        var isHolding = false
        var release: CheckedContinuation<Void, Never>?
        var released = false
    }

    let point: CourierServerConfiguration.Hooks.Point
    private let state = Locked(State())  // not `Mutex`: ThreadSanitizer sees this one's hand-offs

    init(holding point: CourierServerConfiguration.Hooks.Point) { self.point = point }

    var hooks: CourierServerConfiguration.Hooks {
        CourierServerConfiguration.Hooks { [self] point in await self.reached(point) }
    }

    func arm() { state.withLock { $0.armed = true } }

    /// Returns once a request is held.
    func held() async {
        await withCheckedContinuation { continuation in
            let holding = state.withLock { state in
                if !state.isHolding { state.heldWaiters.append(continuation) }
                return state.isHolding
            }
            if holding { continuation.resume() }
        }
    }

    func release() {
        let continuation = state.withLock { state in
            state.released = true
            return state.release.take()
        }
        continuation?.resume()
    }

    private func reached(_ point: CourierServerConfiguration.Hooks.Point) async {
        guard point == self.point, state.withLock({ state in
            guard state.armed else { return false }
            state.armed = false
            return true
        }) else { return }
        await withCheckedContinuation { continuation in
            let (waiters, released) = state.withLock { state in
                state.isHolding = true
                state.release = continuation
                defer { state.heldWaiters = [] }
                return (state.heldWaiters, state.released)
            }
            for waiter in waiters { waiter.resume() }
            if released { release() }
        }
    }
}
