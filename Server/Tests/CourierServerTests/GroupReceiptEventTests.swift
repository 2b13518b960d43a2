import CourierStorage
import CourierWire
import Testing

// Courier — Apache-2.0
@testable import CourierServer

/// How the reads of one request become `groupReceipts` events (ADR 0010).
@Suite("Group receipt events")
struct GroupReceiptEventTests {
    let group = ConversationID.group("team")

    func change(_ seq: Int64, sender: AccountID = "alice", readCount: Int) -> GroupReceiptChange {
        GroupReceiptChange(
            seq: Seq(seq),
            tally: ReceiptTally(
                messageID: MessageID(rawValue: "m\(seq)"),
                sender: sender,
                audience: 2_000,
                readCount: readCount
            )
        )
    }

    func updates(_ publication: Publication) -> [GroupReceiptUpdate] {
        guard case .groupReceipts(let event) = publication.event else { return [] }
        return event.updates
    }

    @Test("many readers merge into one update per message with the final counts; a message's readers are never split")
    func mergeAndSplit() {
        // 1,500 readers read m1 (counts 1…1,500 as each commits); the first 10 also read m2; bob's m3 is read once.
        let reads = (0..<1_500).map { index in
            (
                reader: AccountID(rawValue: "r\(index)"),
                receipts: [change(1, readCount: index + 1)]
                    + (index < 10 ? [change(2, readCount: index + 1)] : [])
                    + (index == 0 ? [change(3, sender: "bob", readCount: 1)] : [])
            )
        }
        let publications = ReadService.receiptPublications(reads, in: group, at: 42, content: nil)
        let toAlice = publications.filter { $0.recipients == ["alice"] }.map(updates)
        let toBob = publications.filter { $0.recipients == ["bob"] }.map(updates)
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
        let publications = ReadService.receiptPublications(
            [change(1, readCount: 1), change(2, readCount: 1)],
            in: group,
            reader: "carol",
            at: 7,
            content: (text: "on it", acked: [Seq(2)])
        )
        let all = publications.flatMap(updates)
        #expect(all.map(\.messageID) == ["m1", "m2"])
        #expect(all[0].contents == nil && all[1].contents == ["carol": "on it"])
    }
}
