// Courier — Apache-2.0
import CourierStorage
import CourierWire
import Foundation
import Testing

/// What another node learns of a commit, derived once from what the transaction returned (issue 34), without I/O.
@Suite("The change a commit tells the other nodes")
struct StoreChangeTests {
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

    @Test("an appended entry carries itself and its membership version; a duplicate tells nothing")
    func appended() {
        let result = AppendResult(message: Self.entry(4, in: Self.group), isDuplicate: false, membershipSeq: Seq(2))
        #expect(
            StoreChange.appended(result, origin: "a").map(\.what) == [
                .appended(Self.entry(4, in: Self.group), membershipSeq: Seq(2))
            ]
        )
        #expect(StoreChange.appended(AppendResult(message: Self.entry(4), isDuplicate: true), origin: "a").isEmpty)
    }

    @Test("a delivery tells its watermark when it moved in a direct conversation, and nothing otherwise")
    func delivered() {
        let watermark = Watermark(seq: Seq(3), time: Timestamp(milliseconds: 7))
        let moved = WatermarkChange(watermark: watermark, advanced: true)
        #expect(
            StoreChange.delivered("bob", in: Self.direct, moved, origin: "a").map(\.what) == [
                .delivered(Self.direct, account: "bob", watermark: watermark)
            ]
        )
        let stale = WatermarkChange(watermark: watermark, advanced: false)
        #expect(StoreChange.delivered("bob", in: Self.direct, stale, origin: "a").isEmpty)
        #expect(StoreChange.delivered("bob", in: Self.group, moved, origin: "a").isEmpty)
    }

    @Test("a direct read tells what it shared and that the reader's own position moved; a private one only the latter")
    func directRead() {
        let mark = ResolvedRead(
            reader: "bob", conversation: Self.direct, target: .all, isShared: true, time: Timestamp(milliseconds: 9)
        )
        let shared = MemberReceipts(
            account: "bob", delivered: Watermark(seq: Seq(5), time: .zero), read: Watermark(seq: Seq(5), time: .zero)
        )
        let change = ReadChange(own: Self.readState(5), ownChanged: true, shared: shared)
        #expect(
            StoreChange.read(mark, change, origin: "a").map(\.what) == [
                .read(Self.direct, account: "bob", shared: shared),
                .readState(Self.direct, account: "bob", cause: .conversation),
            ]
        )
        let privately = ReadChange(own: Self.readState(5), ownChanged: true, shared: nil)
        #expect(StoreChange.read(mark, privately, origin: "a").map(\.what) == [
            .readState(Self.direct, account: "bob", cause: .conversation)
        ])
    }

    @Test("a group read tells the messages it counted, 200 per notification, with its note on the messages it named")
    func groupRead() {
        let receipts = (1...450).map { seq in
            GroupReceiptChange(
                seq: Seq(Int64(seq)),
                tally: ReceiptTally(messageID: MessageID(rawValue: "m\(seq)"), sender: "alice", audience: 3, readCount: 1)
            )
        }
        let mark = ResolvedRead(
            reader: "bob", conversation: Self.group, target: .seqs([Seq(3), Seq(300)]), isShared: true,
            time: Timestamp(milliseconds: 9), content: "on my way"
        )
        let change = ReadChange(own: Self.readState(0), ownChanged: false, shared: nil, receipts: receipts)
        let told = StoreChange.read(mark, change, origin: "a").map(\.what)
        #expect(told.count == 3)
        guard case .groupRead(_, let reader, let seqs, _, let content, let acked) = told.first,
            case .groupRead(_, _, let secondSeqs, _, let secondContent, let secondAcked) = told[1],
            case .groupRead(_, _, let lastSeqs, _, let lastContent, _) = told.last
        else {
            Issue.record("not group reads: \(told)")
            return
        }
        #expect(reader == "bob" && seqs.count == 200 && secondSeqs.count == 200 && lastSeqs.count == 50)
        #expect(content == "on my way" && acked == [Seq(3)])
        #expect(secondContent == "on my way" && secondAcked == [Seq(300)])
        #expect(lastContent == nil)
    }

    @Test("what does not fit a notification is told by reference: an entry by its seq, a read without its receipts")
    func compact() throws {
        let long = StoreChange.appended(
            AppendResult(message: Self.entry(7, body: String(repeating: "x", count: 10_000)), isDuplicate: false),
            origin: "a"
        )[0]
        #expect(long.compact.what == .appendedAt(Self.direct, seq: Seq(7), membershipSeq: nil))
        let encoded = try JSONEncoder().encode(long.compact)
        #expect(encoded.count < 200)
        #expect(try JSONDecoder().decode(StoreChange.self, from: encoded) == long.compact)
        let shared = MemberReceipts(
            account: "bob", delivered: Watermark(seq: Seq(5), time: .zero), read: Watermark(seq: Seq(5), time: .zero)
        )
        let read = StoreChange(.read(Self.direct, account: "bob", shared: shared), origin: "a")
        #expect(read.compact.what == .read(Self.direct, account: "bob", shared: nil))
    }

    @Test("the notification another node's test helper writes by hand (PostgresTestDatabase.notifyChanges) decodes")
    func handWritten() throws {
        let text = #"{"what": {"appendedAt": {"_0": "d:alice:bob", "seq": 7}}, "origin": "other-node"}"#
        let change = try JSONDecoder().decode(StoreChange.self, from: Data(text.utf8))
        #expect(change.what == .appendedAt(Self.direct, seq: Seq(7), membershipSeq: nil) && change.origin == "other-node")
    }
}
