// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierWire
import Foundation
import Testing

/// The change a commit made, derived once from what the transaction returned, and what the other nodes are told of it
/// (ADR 0033), without I/O.
@Suite("The change a commit made")
struct ChangeTests {
    static let direct = ConversationID.direct("alice", "bob")
    static let group = ConversationID.group("crew")

    static func entry(_ seq: Int64, in conversation: ConversationID = direct, body: String = "hi") -> WireMessage {
        WireMessage(
            id: MessageID(rawValue: "m\(seq)"), conversation: conversation, seq: Seq(seq), clientID: ClientMessageID(rawValue: "c\(seq)"),
            sender: "alice", time: Timestamp(milliseconds: 1_000 + seq), body: body
        )
    }

    static func readState(_ seq: Int64) -> ReadState {
        ReadState(
            conversation: direct, watermark: Watermark(seq: Seq(seq), time: Timestamp(milliseconds: 9)),
            readSeqs: [], unreadCount: 0
        )
    }

    @Test("an appended entry carries itself, its membership version and whether a push is owed; a duplicate or imported entry is no change")
    func appended() {
        let entry = Self.entry(4, in: Self.group)
        #expect(
            AppendOutcome(appended: entry, membershipSeq: Seq(2), announcement: .everyone).change
                == .appended(entry, membershipSeq: Seq(2), pushes: true)
        )
        #expect(
            AppendOutcome(appended: entry, membershipSeq: Seq(2), announcement: .withoutPush).change
                == .appended(entry, membershipSeq: Seq(2), pushes: false)
        )
        #expect(AppendOutcome(appended: entry, membershipSeq: Seq(2), announcement: .nobody).change == nil)
        #expect(AppendOutcome(duplicateOf: Self.entry(4)).change == nil)
    }

    @Test("a delivery is a change when its watermark moved")
    func delivered() {
        let watermark = Watermark(seq: Seq(3), time: Timestamp(milliseconds: 7))
        let moved = DeliveryOutcome("bob", in: Self.direct, watermark: watermark, advanced: true, at: Timestamp(milliseconds: 8))
        #expect(moved.change == .delivered(Self.direct, account: "bob", watermark: watermark, at: Timestamp(milliseconds: 8)))
        let stale = DeliveryOutcome("bob", in: Self.direct, watermark: watermark, advanced: false, at: .zero)
        #expect(stale.change == nil && !stale.advanced && moved.advanced)
    }

    @Test("a read carries the reader's own state when it moved and what it shared; a read that moved nothing is no change")
    func directRead() {
        let resolved = ResolvedRead(
            reader: "bob", conversation: Self.direct, target: .all, isShared: true, time: Timestamp(milliseconds: 9)
        )
        let shared = MemberReceipts(
            account: "bob", delivered: Watermark(seq: Seq(5), time: .zero), read: Watermark(seq: Seq(5), time: .zero)
        )
        let change = ReadOutcome(own: Self.readState(5), ownChanged: true, shared: shared)
        let read = Change.Read(
            conversation: Self.direct, reader: "bob", time: Timestamp(milliseconds: 9), cause: .conversation,
            own: Self.readState(5), shared: shared
        )
        #expect(Change.read(resolved, change) == .read(read))
        let privately = ReadOutcome(own: Self.readState(5), ownChanged: true, shared: nil)
        let own = Change.Read(
            conversation: Self.direct, reader: "bob", time: Timestamp(milliseconds: 9), cause: .conversation,
            own: Self.readState(5), shared: nil
        )
        #expect(Change.read(resolved, privately) == .read(own))
        #expect(Change.read(resolved, ReadOutcome(own: Self.readState(5), ownChanged: false, shared: nil)) == nil)
        var imported = resolved
        imported.isAnnounced = false
        #expect(Change.read(imported, change) == nil)
    }

    static func receipts(_ seqs: ClosedRange<Int>) -> [ReceiptUpdate] {
        seqs.map { seq in
            ReceiptUpdate(
                seq: Seq(Int64(seq)),
                tally: ReceiptTally(messageID: MessageID(rawValue: "m\(seq)"), sender: "alice", audience: 3, readCount: 1)
            )
        }
    }

    @Test("a group read keeps its note for the messages it named that it counted")
    func groupReadNote() throws {
        let resolved = ResolvedRead(
            reader: "bob", conversation: Self.group, target: .seqs([Seq(3), Seq(9)]), isShared: true,
            time: Timestamp(milliseconds: 9), note: "on my way",
        )
        let change = ReadOutcome(own: Self.readState(0), ownChanged: false, shared: nil, receipts: Self.receipts(2...4))
        guard case .read(let read) = Change.read(resolved, change) else {
            Issue.record("not a read")
            return
        }
        #expect(read.noted == [Seq(3)] && read.note == "on my way" && read.own == nil && read.receipts.count == 3)
        let unnamed = ResolvedRead(
            reader: "bob", conversation: Self.group, target: .seqs([Seq(9)]), isShared: true,
            time: Timestamp(milliseconds: 9), note: "on my way",
        )
        guard case .read(let withoutNote) = Change.read(unnamed, change) else {
            Issue.record("not a read")
            return
        }
        #expect(withoutNote.noted.isEmpty && withoutNote.note == nil)
    }

    @Test("other nodes are told only what they act on: no group delivery, no group read that counted nothing for anyone")
    func concernsOtherNodes() {
        let time = Timestamp(milliseconds: 9)
        let watermark = Watermark(seq: Seq(3), time: time)
        #expect(Change.delivered(Self.direct, account: "bob", watermark: watermark, at: time).concernsOtherNodes)
        #expect(!Change.delivered(Self.group, account: "bob", watermark: watermark, at: time).concernsOtherNodes)
        let shared = MemberReceipts(account: "bob", delivered: watermark, read: watermark)
        func read(_ conversation: ConversationID, own: ReadState?, shared: MemberReceipts?, receipts: [ReceiptUpdate] = []) -> Change {
            .read(Change.Read(conversation: conversation, reader: "bob", time: time, cause: .conversation, own: own, shared: shared, receipts: receipts))
        }
        #expect(read(Self.direct, own: nil, shared: shared).concernsOtherNodes)
        #expect(!read(Self.group, own: nil, shared: shared).concernsOtherNodes)
        #expect(read(Self.group, own: Self.readState(3), shared: shared).concernsOtherNodes)
        #expect(read(Self.group, own: nil, shared: shared, receipts: Self.receipts(1...1)).concernsOtherNodes)
        #expect(Change.appended(Self.entry(1), membershipSeq: nil, pushes: false).concernsOtherNodes)
    }

    @Test("what fits a notification travels whole and decodes as sent")
    func whole() throws {
        let change = Change.appended(Self.entry(7), membershipSeq: nil, pushes: true)
        let notice = ChangeNotice(change, origin: "a")
        let encoded = try JSONEncoder().encode(notice)
        #expect(try JSONDecoder().decode(ChangeNotice.self, from: encoded) == notice)
    }

    @Test("what does not fit travels by reference: an entry by its seq, a read by its reader with 200 counted messages per notice")
    func compact() throws {
        let long = ChangeNotice(
            .appended(Self.entry(7, body: String(repeating: "x", count: 10_000)), membershipSeq: Seq(2), pushes: true),
            origin: "a"
        )
        #expect(long.compact.map(\.content) == [.entry(Self.direct, seq: Seq(7), membershipSeq: Seq(2))])
        let encoded = try JSONEncoder().encode(long.compact[0])
        #expect(encoded.count < 200)
        #expect(try JSONDecoder().decode(ChangeNotice.self, from: encoded) == long.compact[0])

        let read = Change.Read(
            conversation: Self.group, reader: "bob", time: Timestamp(milliseconds: 9), cause: .message,
            own: Self.readState(0), shared: nil, receipts: Self.receipts(1...450), note: "on my way",
            noted: [Seq(3), Seq(300)]
        )
        let notices = ChangeNotice(.read(read), origin: "a").compact.map(\.content)
        #expect(notices.count == 3)
        guard case .read(let first) = notices[0], case .read(let second) = notices[1], case .read(let last) = notices[2]
        else {
            Issue.record("not reads: \(notices)")
            return
        }
        #expect(first.reader == "bob" && first.cause == .message && first.ownMoved && !second.ownMoved)
        #expect(first.seqs.count == 200 && second.seqs.count == 200 && last.seqs.count == 50)
        #expect(first.note == "on my way" && first.noted == [Seq(3)])
        #expect(second.note == "on my way" && second.noted == [Seq(300)])
        #expect(last.note == nil)
        // A direct read's reference names what moved; its receipts are read by the receiver.
        let direct = Change.Read(
            conversation: Self.direct, reader: "bob", time: .zero, cause: .conversation, own: nil,
            shared: MemberReceipts(account: "bob", delivered: .zero, read: .zero)
        )
        guard case .read(let reference) = ChangeNotice(.read(direct), origin: "a").compact.first?.content else {
            Issue.record("not a read")
            return
        }
        #expect(!reference.ownMoved && reference.sharedMoved && reference.seqs.isEmpty)
    }

    @Test("the notification another node's test helper writes by hand (PostgresTestDatabase.notifyChanges) decodes")
    func handWritten() throws {
        let text = #"{"content": {"entry": {"_0": "d:alice:bob", "seq": 7}}, "origin": "other-node"}"#
        let notice = try JSONDecoder().decode(ChangeNotice.self, from: Data(text.utf8))
        #expect(notice.content == .entry(Self.direct, seq: Seq(7), membershipSeq: nil) && notice.origin == "other-node")
    }
}
