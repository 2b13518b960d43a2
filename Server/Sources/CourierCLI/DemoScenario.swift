// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import Foundation

/// The demo's scenario: each step acts through the SDK as an app would, then checks what the SDK reports.
extension DemoWorld {
    func play(_ narrator: Narrator) async throws {
        let direct = ConversationID.direct("alice", "bob")
        let team = ConversationID.group("team")

        narrator.begin("A server and four people")
        narrator.note("courier-server on ws://127.0.0.1:\(node.port)/v1/ws (SQLite in a temporary folder)")
        try await node.backend.store.registerAccount("dave", at: .now())
        for (client, account) in [(alice, "alice"), (bobPhone, "bob"), (bobLaptop, "bob"), (carol, "carol")] {
            try await connect(client, as: AccountID(rawValue: account))
        }
        narrator.note("alice, carol, and bob on two devices (phone and laptop) are online; dave is offline")

        // MARK: Direct: delivered, then the three kinds of read ack.
        narrator.begin("A direct message is delivered ✓")
        var aliceEvents = alice.events()
        var phoneEvents = bobPhone.events()
        var laptopEvents = bobLaptop.events()
        let lunch = try await alice.send("Hi Bob! Lunch today?", to: direct).stored()
        narrator.note("alice → bob: “\(lunch.body)”")
        try await expect(phoneEvents, "bob's phone to receive it") { $0.receivedMessage?.id == lunch.id }
        try await expect(laptopEvents, "bob's laptop to receive it") { $0.receivedMessage?.id == lunch.id }
        try await expect(aliceEvents, "alice to get the delivery receipt") {
            $0.deliveryUpdate?.messageIDs.contains(lunch.id) == true
        }
        try check(try await alice.message(lunch.id)?.status == .delivered, "alice's copy should be delivered")
        narrator.note("✓ on alice's side: bob's devices stored it (both show it, unread)")

        narrator.begin("bob reads it ✓✓ — the three kinds of read ack")
        try await bobPhone.markRead(lunch.id, in: direct)
        try await expectRead(lunch, by: aliceEvents)
        narrator.note("✓✓ message read ack (Agora sendMessageReadAck, NIM sendMessageReceipt): “\(lunch.body)”")
        let first = try await alice.send("Italian or Thai?", to: direct).stored()
        let second = try await alice.send("I can book for 12:30", to: direct).stored()
        try await expect(phoneEvents, "bob's phone to receive both") { $0.receivedMessage?.id == second.id }
        try await bobPhone.markRead(upTo: second.time, in: direct)
        try await expectRead(second, by: aliceEvents)
        try check(try await alice.message(first.id)?.status == .read, "an earlier message should be read too")
        narrator.note("✓✓ read up to a time (RongCloud sendReadReceiptMessage): “\(first.body)”, “\(second.body)”")
        let third = try await alice.send("See you there", to: direct).stored()
        try await expect(phoneEvents, "bob's phone to receive it") { $0.receivedMessage?.id == third.id }
        try await bobPhone.markConversationRead(direct)
        try await expectRead(third, by: aliceEvents)
        narrator.note("✓✓ conversation read ack (Agora ackConversationRead): “\(third.body)”")

        narrator.begin("bob's laptop clears its unread count when his phone reads")
        try await expect(laptopEvents, "the laptop to hold every message") { $0.receivedMessage?.id == third.id }
        let question = try await alice.send("Bring the umbrella?", to: direct).stored()
        try await expect(laptopEvents, "the laptop to receive it") { $0.receivedMessage?.id == question.id }
        try check(try await bobLaptop.unreadCount(in: direct) == 1, "the laptop should count 1 unread")
        narrator.note("alice → bob: “\(question.body)” — the laptop shows 1 unread")
        try await expect(phoneEvents, "the phone to receive it") { $0.receivedMessage?.id == question.id }
        try await bobPhone.markConversationRead(direct)
        try await expect(laptopEvents, "the laptop to hear of the read") {
            $0.conversationReadUpdate.map { $0.watermark.seq >= question.seq } == true
        }
        try check(try await bobLaptop.unreadCount(in: direct) == 0, "the laptop's unread count should be 0")
        narrator.note("bob reads on his phone → the laptop's unread count drops to 0, with no read of its own")

        // MARK: Group receipts.
        narrator.begin("A group message asks for read receipts: read by 2/3, then 3/3")
        aliceEvents = alice.events()
        let carolEvents = carol.events()
        phoneEvents = bobPhone.events()
        _ = try await alice.createGroup("team", members: ["bob", "carol", "dave"])
        let standup = try await alice.send("Stand-up at 10, please confirm", to: team, needsReadReceipt: true).stored()
        narrator.note("alice created “team” with bob, carol and dave, and asked for receipts on “\(standup.body)”")
        try await expect(phoneEvents, "bob to receive it") { $0.receivedMessage?.id == standup.id }
        try await expect(carolEvents, "carol to receive it") { $0.receivedMessage?.id == standup.id }
        try await bobPhone.markRead(standup.id, in: team)
        try await carol.markRead([standup.id], in: team, content: "👍")
        let twoOfThree = try await expect(aliceEvents, "alice to see 2 readers") {
            $0.groupReadReceiptUpdate.flatMap { $0.messageID == standup.id && $0.readCount == 2 ? $0 : nil }
        }
        try check(twoOfThree.unreadCount == 1, "1 member should still be unread")
        narrator.note("read by 2/3 (NIM team receipts, Agora group read acks)")
        let readList = try await alice.readReceiptList(for: standup.id, in: team, list: .read)
        let unreadList = try await alice.readReceiptList(for: standup.id, in: team, list: .unread)
        let readers = readList.entries.map(\.account.rawValue).sorted()
        try check(readers == ["bob", "carol"], "the read list should be bob and carol, not \(readers)")
        try check(unreadList.entries.map(\.account) == ["dave"], "the unread list should be dave")
        let note = readList.entries.first { $0.account == "carol" }?.content ?? ""
        narrator.note("read list: \(readers.joined(separator: ", ")) (carol's note: \(note)); unread list: dave")
        try await connect(dave, as: "dave")
        try await dave.markRead(standup.id, in: team)
        try await expect(aliceEvents, "alice to see 3 readers") {
            $0.groupReadReceiptUpdate.map { $0.messageID == standup.id && $0.readCount == 3 } == true
        }
        try check(
            try await alice.readReceiptCounts(for: [standup.id], in: team).first?.unreadCount == 0,
            "nobody should be unread"
        )
        narrator.note("dave comes online and reads it → read by 3/3")

        // MARK: Edit and react.
        narrator.begin("alice edits a message and bob reacts to it")
        aliceEvents = alice.events()
        phoneEvents = bobPhone.events()
        let plan = try await alice.send("Standup at 9:00", to: direct).stored()
        try await expect(phoneEvents, "bob's phone to receive it") { $0.receivedMessage?.id == plan.id }
        try await alice.edit(plan.id, in: direct, body: "Standup at 9:30")
        let edited = try await expect(phoneEvents, "bob's phone to see the edit") {
            $0.editedMessage.flatMap { $0.id == plan.id ? $0 : nil }
        }
        try check(edited.body == "Standup at 9:30" && edited.editedAt != nil, "bob's copy should show the new text, edited")
        try await bobPhone.react("👍", to: plan.id, in: direct)
        let reacted = try await expect(aliceEvents, "alice to see bob's reaction") {
            $0.reactionUpdate.flatMap { $0.messageID == plan.id ? $0 : nil }
        }
        try check(reacted.counts == [ReactionCount(reaction: "👍", count: 1)], "alice should see 👍 1")
        narrator.note("“\(plan.body)” became “\(edited.body)” on bob's phone (edited); alice sees bob's 👍 under it")

        // MARK: Recall.
        narrator.begin("alice recalls a message within the window")
        await bobLaptop.disconnect()
        narrator.note("(bob's laptop goes offline)")
        phoneEvents = bobPhone.events()
        let typo = try await alice.send("See you at 10pm", to: direct).stored()
        try await expect(phoneEvents, "bob's phone to receive it") { $0.receivedMessage?.id == typo.id }
        try await alice.recall(typo.id, in: direct, postscript: "wrong time")
        let online = try await expect(phoneEvents, "bob's phone to hear of the recall") {
            $0.recallNotice.flatMap { $0.messageID == typo.id ? $0 : nil }
        }
        try check(try await isRecalled(typo.id, on: bobPhone), "bob's copy should be recalled, its text gone")
        try check(online.arrival == .online, "the phone was online: arrival should be online")
        narrator.note(
            "“\(typo.body)” shows as recalled on bob's phone, its text gone (arrival: \(online.arrival), postscript: “\(online.postscript ?? "")”)"
        )

        narrator.begin("A recall outside the window is refused with a clear error")
        let late = try await alice.send("Too late to take back", to: direct).stored()
        try await expect(phoneEvents, "bob's phone to receive it") { $0.receivedMessage?.id == late.id }
        clock.advance(by: .seconds(121))
        narrator.note("(the server's clock moves 2 minutes and 1 second ahead)")
        do {
            try await alice.recall(late.id, in: direct)
            throw DemoFailure("the recall should have been refused")
        } catch let error as CourierError {
            try check(error.code == .recallWindowExpired, "expected recall.windowExpired, got \(error.code)")
            narrator.note("refused: \(error)")
        }
        try check(try await bobPhone.message(late.id)?.body == late.body, "bob should still have it")

        narrator.begin("An admin recalls a member's message in the group")
        try await alice.setRole(.admin, for: ["bob"], in: team)
        aliceEvents = alice.events()
        phoneEvents = bobPhone.events()
        let wrong = try await carol.send("(meant for another group)", to: team).stored()
        try await expect(phoneEvents, "bob to receive it") { $0.receivedMessage?.id == wrong.id }
        try await expect(aliceEvents, "alice to receive it") { $0.receivedMessage?.id == wrong.id }
        try await bobPhone.recall(wrong.id, in: team)
        let byAdmin = try await expect(aliceEvents, "alice to hear of the recall") {
            $0.recallNotice.flatMap { $0.messageID == wrong.id ? $0 : nil }
        }
        try check(byAdmin.recalledBy == "bob" && byAdmin.sender == "carol", "bob should have recalled carol's message")
        try await expect(carolEvents, "carol to hear of the recall") { $0.recallNotice?.messageID == wrong.id }
        try check(try await isRecalled(wrong.id, on: carol), "carol's own copy should be recalled too")
        narrator.note("alice made bob an admin; bob recalled carol's “\(wrong.body)” for everyone")

        narrator.begin("bob's laptop comes back and catches up")
        try await bobPhone.markConversationRead(direct)
        laptopEvents = bobLaptop.events()
        try await connect(bobLaptop, as: "bob")
        let caughtUp = try await expect(laptopEvents, "the laptop to learn of the recall") {
            $0.recallNotice.flatMap { $0.messageID == typo.id ? $0 : nil }
        }
        try check(caughtUp.arrival == .offline, "the laptop was offline: arrival should be offline")
        try check(try await isRecalled(typo.id, on: bobLaptop), "the laptop should show the message as recalled")
        try check(try await bobLaptop.message(late.id)?.body == late.body, "the laptop should have “\(late.body)”")
        try check(try await isRecalled(wrong.id, on: bobLaptop), "the admin's recall should reach the laptop")
        try check(try await bobLaptop.unreadCount(in: direct) == 0, "the phone's read should reach the laptop")
        try check(try await bobLaptop.unreadCount(in: team) == 0, "nothing in the group should be unread on the laptop")
        narrator.note("messages: “\(late.body)” arrived; the recall of “\(typo.body)” arrived (arrival: offline)")
        narrator.note("receipts: the phone's reads cleared the laptop's unread count; carol's message is gone")
    }

    /// Whether `client` shows `id` as recalled: in place with status `recalled` and no text, or not at all (a device that
    /// never held it).
    private func isRecalled(_ id: MessageID, on client: CourierClient) async throws -> Bool {
        guard let shown = try await client.message(id) else { return true }
        return shown.status == .recalled && shown.body.isEmpty
    }

    /// Waits until `events` has an event that `match` accepts; fails the current step after the timeout.
    @discardableResult
    func expect<T: Sendable>(
        _ events: AsyncStream<CourierEvent>,
        _ what: String,
        _ match: @escaping @Sendable (CourierEvent) -> T?
    ) async throws -> T {
        let timeout = self.timeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                for await event in events { if let value = match(event) { return value } }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() ?? nil else {
                throw DemoFailure("waited \(timeout) for \(what)")
            }
            return value
        }
    }

    func expect(
        _ events: AsyncStream<CourierEvent>,
        _ what: String,
        _ accepts: @escaping @Sendable (CourierEvent) -> Bool
    ) async throws {
        try await expect(events, what) { accepts($0) ? true : nil }
    }

    /// Waits for the read receipt of `message` on its sender's side, and checks the local copy shows it read.
    func expectRead(_ message: Message, by events: AsyncStream<CourierEvent>) async throws {
        try await expect(events, "alice to get the read receipt of “\(message.body)”") {
            $0.readUpdate?.messageIDs.contains(message.id) == true
        }
        try check(try await alice.message(message.id)?.status == .read, "“\(message.body)” should show read")
    }

    func check(_ condition: Bool, _ what: String) throws {
        guard condition else { throw DemoFailure(what) }
    }
}
