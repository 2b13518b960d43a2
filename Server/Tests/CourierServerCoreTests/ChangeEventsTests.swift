// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierWire
import Testing

@testable import CourierServerCore

/// The device events a change causes and who gets them (``Change/events(of:)``), the one derivation the committing
/// node and every other node use, without I/O.
@Suite("The events of a change")
struct ChangeEventsTests {
    let direct = ConversationID.direct("alice", "bob")
    let group = ConversationID.group("team")
    let watermark = Watermark(seq: Seq(3), time: Timestamp(milliseconds: 7))

    func change(_ seq: Int64, sender: AccountID = "alice", readCount: Int) -> ReceiptUpdate {
        ReceiptUpdate(
            seq: Seq(seq),
            tally: ReceiptTally(
                messageID: MessageID(rawValue: "m\(seq)"),
                sender: sender,
                audience: 2_000,
                readCount: readCount
            )
        )
    }

    func read(
        _ reader: AccountID,
        in conversation: ConversationID,
        own: ReadState? = nil,
        shared: MemberReceipts? = nil,
        receipts: [ReceiptUpdate] = [],
        note: String? = nil,
        noted: [Seq] = [],
        at time: Timestamp = Timestamp(milliseconds: 42)
    ) -> Change {
        .read(
            Change.Read(
                conversation: conversation, reader: reader, time: time, cause: .message, own: own, shared: shared,
                receipts: receipts, note: note, noted: noted
            )
        )
    }

    func updates(_ event: ChangeEvent) -> [GroupReceiptUpdate] {
        guard case .groupReceipts(let receipts) = event.event else { return [] }
        return receipts.updates
    }

    func entry(in conversation: ConversationID, group change: WireGroupChange? = nil) -> WireMessage {
        WireMessage(
            id: "m1", conversation: conversation, seq: Seq(5), clientID: "c1", sender: "alice",
            time: Timestamp(milliseconds: 1), body: "hi", group: change
        )
    }

    @Test("an entry goes to a direct conversation's two members, or to the group's members at its version and whom a membership change names")
    func entries() {
        let directEntry = entry(in: direct)
        #expect(
            Change.events(of: [.appended(directEntry, membershipSeq: nil, pushes: true)]) == [
                ChangeEvent(event: .message(MessageEvent(message: directEntry)), audience: .accounts(["alice", "bob"]))
            ]
        )
        let groupEntry = entry(in: group)
        #expect(
            Change.events(of: [.appended(groupEntry, membershipSeq: Seq(2), pushes: false)]).map(\.audience) == [
                .members(of: group, version: Seq(2), entry: Seq(5), named: [])
            ]
        )
        let removal = entry(in: group, group: WireGroupChange(action: .removed, accounts: ["carol"]))
        #expect(
            Change.events(of: [.appended(removal, membershipSeq: Seq(4), pushes: true)]).map(\.audience) == [
                .members(of: group, version: Seq(4), entry: Seq(5), named: ["carol", "alice"])
            ]
        )
    }

    @Test("a delivery goes to the other member of a direct conversation; a group's deliveries are asked for")
    func deliveries() {
        let time = Timestamp(milliseconds: 9)
        #expect(
            Change.events(of: [.delivered(direct, account: "bob", watermark: watermark, at: time)]) == [
                ChangeEvent(
                    event: .delivered(DeliveredEvent(conversation: direct, account: "bob", watermark: watermark)),
                    audience: .accounts(["alice"])
                )
            ]
        )
        #expect(Change.events(of: [.delivered(group, account: "bob", watermark: watermark, at: time)]).isEmpty)
    }

    @Test("a read tells the reader's own devices where it is, and the other member of a direct conversation what it shared")
    func reads() {
        let state = ReadState(conversation: direct, watermark: watermark, readSeqs: [], unreadCount: 0)
        let shared = MemberReceipts(account: "bob", delivered: watermark, read: watermark, readSeqs: [Seq(5)])
        #expect(
            Change.events(of: [read("bob", in: direct, own: state, shared: shared)]) == [
                ChangeEvent(event: .readState(ReadStateEvent(state: state, cause: .message)), audience: .accounts(["bob"])),
                ChangeEvent(
                    event: .read(ReadEvent(conversation: direct, account: "bob", watermark: watermark, readSeqs: [Seq(5)])),
                    audience: .accounts(["alice"])
                ),
            ]
        )
        // In a group, what the reader shares is not pushed to every member: only the counts, to the senders.
        #expect(Change.events(of: [read("bob", in: group, shared: shared)]).isEmpty)
    }

    @Test("a view goes to its account's devices; an account's change or a kick is no event")
    func views() {
        let view = ConversationView(cleared: Seq(2), deletedSeqs: [], muted: true, pinnedAt: nil)
        #expect(
            Change.events(of: [.viewChanged(direct, account: "bob", view: view), .accountChanged("bob"), .deviceKicked("bob", device: nil)]) == [
                ChangeEvent(event: .view(ViewEvent(conversation: direct, view: view)), audience: .accounts(["bob"]))
            ]
        )
    }

    @Test("many readers merge into one update per message with the final counts; a message's readers are never split")
    func mergeAndSplit() {
        // 1,500 readers read m1 (counts 1…1,500 as each commits); the first 10 also read m2; bob's m3 is read once.
        let reads = (0..<1_500).map { index in
            read(
                AccountID(rawValue: "r\(index)"),
                in: group,
                receipts: [change(1, readCount: index + 1)]
                    + (index < 10 ? [change(2, readCount: index + 1)] : [])
                    + (index == 0 ? [change(3, sender: "bob", readCount: 1)] : [])
            )
        }
        let events = Change.events(of: reads)
        let toAlice = events.filter { $0.audience == .accounts(["alice"]) }.map(updates)
        let toBob = events.filter { $0.audience == .accounts(["bob"]) }.map(updates)
        // m1 alone exceeds 1,000 readers and stays whole; m2 goes in the next event.
        #expect(toAlice.map { $0.map(\.messageID) } == [["m1"], ["m2"]])
        let m1 = toAlice[0][0]
        #expect(m1.readers.count == 1_500 && m1.readers.values.allSatisfy { $0 == 42 })
        #expect(m1.readCount == 1_500 && m1.unreadCount == 500 && m1.contents == nil)
        #expect(toAlice[1][0].readCount == 10 && toAlice[1][0].readers.count == 10)
        #expect(toBob.map { $0.map(\.messageID) } == [["m3"]] && toBob[0][0].readers.keys.sorted() == ["r0"])
    }

    @Test("one reader's ack note goes with the messages it named only")
    func noteWithNamedMessages() {
        let events = Change.events(
            of: [
                read(
                    "carol", in: group, receipts: [change(1, readCount: 1), change(2, readCount: 1)], note: "on it",
                    noted: [Seq(2)], at: 7
                )
            ]
        )
        let all = events.flatMap(updates)
        #expect(all.map(\.messageID) == ["m1", "m2"])
        #expect(all[0].contents == nil && all[1].contents == ["carol": "on it"])
        #expect(all.allSatisfy { $0.readers == ["carol": 7] })
    }
}
