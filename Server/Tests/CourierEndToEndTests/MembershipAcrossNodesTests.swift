// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Two server nodes sharing one PostgreSQL database agree on a group's members the moment a change is acknowledged:
/// the node that did not make the change never acts on a member list it loaded before (runs when
/// `COURIER_TEST_POSTGRES_URL` is set; `.ci/run` always sets it).
///
/// alice (the owner) changes the group, bob (a member) sends, carol is the member removed and erin the one added.
/// Each race is made to happen every round: both nodes hold the changes other nodes notify them of (a configuration
/// hook) from just before the membership change until the requests that follow it are answered, so the node that did
/// not make the change has not heard of it — a notification still on its way (ADR 0023).
/// The race scenarios run 24 rounds each, in a new group each round and with the same connected devices: three rounds
/// for each of the 8 placements of alice, bob and carol or erin on node A or B (see ``Round``). Under ThreadSanitizer
/// (CI's run sets `TSAN_OPTIONS`), which hunts data races rather than these, one round per placement.
// Serialized: each test runs two nodes with eight connected clients for 24 rounds; five at once on CI's two cores
// starved the suite's timing-sensitive tests (a 2 s token lifetime), and one at a time takes as long in all.
@Suite(
    "Group membership across nodes",
    .serialized,
    .timeLimit(.minutes(5)),
    .enabled(if: PostgresTestDatabase.isAvailable)
)
struct MembershipAcrossNodesTests {
    @Test("a member removed through one node receives nothing that is sent through either node after the ack")
    func removalThenSend() async throws {
        try await rounds { devices, round in
            // Given a group of alice, bob and carol that both nodes have used
            let group = try await devices.group(for: round, members: ["bob", "carol"])
            let (bob, carol) = (devices["bob", round.sender].client, devices["carol", round.member])

            // When alice removes carol, and bob sends to the group right after the acknowledgement, before the other
            // node has the removal's notification
            devices.notifications.hold()
            try await devices["alice", round.changer].client.removeMembers(["carol"], from: group)
            let leaked = try await bob.send("after carol left", to: group).stored()
            devices.notifications.release()

            // Then carol's device never gets it: not before bob's direct message to her (the fence), which reaches
            // her device after anything bob's node sent it first (events from one node arrive in commit order)
            let fence = try await bob.send("fence", to: .direct("bob", "carol")).stored()
            let beforeFence = try await carol.messages(until: fence.id)
            #expect(!beforeFence.contains { $0.id == leaked.id }, "\(round)")
            // A message past a gap is stored without an event until the gap is filled: not stored either.
            #expect(try await carol.client.message(leaked.id) == nil, "\(round)")
        }
    }

    @Test("a member added through one node receives what is sent through either node right after the ack")
    func addThenSend() async throws {
        try await rounds { devices, round in
            // Given a group of alice and bob that both nodes have used
            let group = try await devices.group(for: round, members: ["bob"])

            // When alice adds erin, and bob sends to the group right after the acknowledgement, before the other node
            // has the add's notification
            devices.notifications.hold()
            try await devices["alice", round.changer].client.addMembers(["erin"], to: group)
            let welcome = try await devices["bob", round.sender].client.send("welcome", to: group).stored()
            devices.notifications.release()

            // Then erin's device receives it
            let received = try await devices["erin", round.member].received(welcome.id)
            #expect(received.body == "welcome", "\(round)")
        }
    }

    @Test("a member added through one node may send through either node right after the ack")
    func addThenNewMemberSends() async throws {
        try await rounds { devices, round in
            // Given a group of alice and bob that both nodes have used
            let group = try await devices.group(for: round, members: ["bob"])

            // When alice adds erin, and erin sends to the group right after the acknowledgement, before the other
            // node has the add's notification
            devices.notifications.hold()
            try await devices["alice", round.changer].client.addMembers(["erin"], to: group)
            let hi: Message
            do {
                hi = try await devices["erin", round.member].client.send("hi, I am new", to: group).stored()
                devices.notifications.release()
            } catch {
                devices.notifications.release()
                Issue.record("\(round): erin's send was refused: \(error)")
                return
            }

            // Then it is accepted (not `conversation.notAMember`) and reaches bob
            #expect(try await devices["bob", round.sender].received(hi.id).sender == "erin", "\(round)")
        }
    }

    @Test("a dismissal through one node ends the group on both nodes at once and reaches every member's devices")
    func dismissalThenRequests() async throws {
        try await rounds { devices, round in
            // Given a group of alice, bob and carol that both nodes have used
            let group = try await devices.group(for: round, members: ["bob", "carol"])

            // When alice dismisses it, and right after the acknowledgement, before the other node has the
            // dismissal's notification, bob sends through his node and asks for history through the member's node
            // (in this scenario the third bit places that request)
            devices.notifications.hold()
            let last = try await devices["alice", round.changer].client.dismissGroup(group)
            await expectGroupNotFound("\(round), send") {
                _ = try await devices["bob", round.sender].client.send("anyone?", to: group).stored()
            }
            await expectGroupNotFound("\(round), history") {
                _ = try await devices["bob", round.member].client.history(in: group)
            }
            devices.notifications.release()

            // Then (both refused as for a group that does not exist) every device of bob and carol gets the entry
            for account: AccountID in ["bob", "carol"] {
                for node in 0..<2 {
                    let entry = try await devices[account, node].received(last.id)
                    #expect(entry.groupChange?.action == .dismissed, "\(round), \(account) on node \(node)")
                }
            }
        }
    }

    @Test("a device offline during a dismissal gets the entry and what it missed when it syncs through the other node")
    func dismissalReachesOfflineDevice() async throws {
        let folder = try TemporaryFolder()
        let store = CourierClient.Configuration.StoreLocation.file(URL(fileURLWithPath: folder.path + "/carol.sqlite"))
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url) { nodeA, nodeB in
                // Given alice and carol's phone on node A, bob on node B, in a group the phone has used
                try await nodeA.server.register("alice", "bob", "carol")
                let alice = try await nodeA.server.connectedClient("alice")
                let bob = try await nodeB.server.connectedClient("bob")
                let phone = try await nodeA.server.connectedClient("carol", device: "phone", store: store)
                let phoneEvents = phone.events()
                let group = try await alice.createGroup("crew", members: ["bob", "carol"]).conversation
                let seen = try await bob.send("seen", to: group).stored()
                _ = try await phoneEvents.first { $0.receivedMessage.flatMap { $0.id == seen.id ? $0 : nil } }

                // When the phone is offline, bob writes and alice dismisses the group through node A
                await phone.disconnect()
                let missed = try await bob.send("while you were away", to: group).stored()
                let last = try await alice.dismissGroup(group)

                // Then the same device (same store, same id), back through node B, receives both, in order
                let back = try nodeB.server.client(device: "phone", store: store)
                let backEvents = back.events()
                try await back.connect(account: "carol", token: try await nodeB.server.token(for: "carol"))
                let expected: Set<MessageID> = [missed.id, last.id]
                let received = try await backEvents.collect(2) {
                    $0.receivedMessage.flatMap { expected.contains($0.id) ? $0 : nil }
                }
                #expect(received.map(\.id) == [missed.id, last.id])
                #expect(received.last?.groupChange?.action == .dismissed)
                #expect(try await back.messages(in: group).last?.id == last.id)
                await expectGroupNotFound("the phone's history") { _ = try await back.history(in: group) }
            }
        }
    }

    /// Rounds per scenario.
    static let roundCount = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] == nil ? 24 : 8

    /// Runs `body` for ``roundCount`` rounds (three per placement, one under ThreadSanitizer) on two fresh nodes with
    /// alice, bob, carol and erin connected once on each; stops at the first round that throws, recording which.
    private func rounds(_ body: (Devices, Round) async throws -> Void) async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let notifications = NotificationGate()
            try await withTwoNodes(on: url, configure: { $0.hooks.beforeFanOut = notifications.pass }) { nodeA, nodeB in
                let devices = try await Devices.connect([nodeA, nodeB], notifications: notifications)
                for index in 0..<Self.roundCount {
                    let round = Round(index: index)
                    do { try await body(devices, round) } catch {
                        Issue.record("\(round): \(error)")
                        return
                    }
                }
            }
        }
    }

    /// Records an issue unless `body` fails with `group.notFound`.
    private func expectGroupNotFound(_ context: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("\(context): expected group.notFound, got success")
        } catch {
            #expect((error as? CourierError)?.code == .groupNotFound, "\(context): \(error)")
        }
    }
}

extension MembershipAcrossNodesTests {
    /// One round of a race scenario: its index names its group, and the index's low three bits place the roles on a
    /// node (0 is A, 1 is B).
    struct Round: CustomStringConvertible {
        let index: Int
        /// alice's node: she changes the group.
        var changer: Int { index & 1 }
        /// bob's node: he sends.
        var sender: Int { index >> 1 & 1 }
        /// The node of carol or erin, the member the change is about.
        var member: Int { index >> 2 & 1 }

        var description: String {
            let names = ["A", "B"]
            return "round \(index) (alice on \(names[changer]), bob on \(names[sender]), member on \(names[member]))"
        }
    }

    /// One connected device of an account, with its events subscribed before anything happened.
    struct Device {
        let client: CourierClient
        let events: AsyncStream<CourierEvent>

        /// The message `id`, once it reaches this device.
        func received(_ id: MessageID) async throws -> Message {
            try await events.first { $0.receivedMessage.flatMap { $0.id == id ? $0 : nil } }
        }

        /// The messages this device receives before the one with `id` (which is waited for and left out).
        func messages(until id: MessageID) async throws -> [Message] {
            var before: [Message] = []
            var message = try await events.first { $0.receivedMessage }
            while message.id != id {
                before.append(message)
                message = try await events.first { $0.receivedMessage }
            }
            return before
        }
    }

    /// A device of alice, bob, carol and erin on each node.
    struct Devices {
        let byAccount: [AccountID: [Device]]
        /// Holds both nodes' fan-out of each other's changes while a round asks it to.
        let notifications: NotificationGate

        static func connect(_ nodes: [TestNode], notifications: NotificationGate) async throws -> Devices {
            let accounts: [AccountID] = ["alice", "bob", "carol", "erin"]
            for account in accounts { try await nodes[0].server.register(account) }
            var byAccount: [AccountID: [Device]] = [:]
            for account in accounts {
                for (index, node) in nodes.enumerated() {
                    let device = DeviceID(rawValue: index == 0 ? "on-a" : "on-b")
                    let client = try await node.server.connectedClient(account, device: device)
                    byAccount[account, default: []].append(Device(client: client, events: client.events()))
                }
            }
            return Devices(byAccount: byAccount, notifications: notifications)
        }

        /// `account`'s device on node `node` (0 is A, 1 is B).
        subscript(account: AccountID, node: Int) -> Device { byAccount[account]![node] }

        /// alice creates the round's group with `members` through her node; bob sends to it through his, and
        /// alice's devices on both nodes receive that: each node has loaded the member list from before the change
        /// that follows.
        func group(for round: Round, members: [AccountID]) async throws -> ConversationID {
            let alice = self["alice", round.changer].client
            let group = try await alice.createGroup(GroupID(rawValue: "g\(round.index)"), members: members).conversation
            let hello = try await self["bob", round.sender].client.send("hello", to: group).stored()
            for node in 0..<2 { _ = try await self["alice", node].received(hello.id) }
            return group
        }
    }
}

/// Holds the changes other nodes notify a node of while held (``hold()``), and lets them through, in order, once
/// released: a notification that has not arrived yet, on demand.
final class NotificationGate: Sendable {
    private struct State {
        var isHeld = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Locked(State())  // not `Mutex`: ThreadSanitizer sees this one's hand-offs

    func hold() { state.withLock { $0.isHeld = true } }

    func release() {
        let waiting = state.withLock { state in
            state.isHeld = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns at once unless held; then when released.
    @Sendable func pass() async {
        await withCheckedContinuation { continuation in
            let held = state.withLock { state in
                if state.isHeld { state.waiting.append(continuation) }
                return state.isHeld
            }
            if !held { continuation.resume() }
        }
    }
}
