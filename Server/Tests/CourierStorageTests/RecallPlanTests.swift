// Courier — Apache-2.0
import CourierStorage
import CourierWire
import Testing

/// What a recall removes, decided once (issue 17); `RecallStoreContractTests` and the differential test check that
/// each backend runs it.
@Suite("Recall plan")
struct RecallPlanTests {
    let conversation = ConversationID.direct("alice", "bob")

    func notice(_ mode: RecallMode) -> WireRecallNotice {
        WireRecallNotice(messageID: "m1", sender: "alice", recalledBy: "alice", mode: mode)
    }

    @Test("two-way: the body, replies' quotes and receipts go; one-way keeps the sender's copy first")
    func writes() throws {
        let twoWay = try RecallPlan(notice(.twoWay), target: (false, Seq(4)), in: conversation)
        #expect(twoWay.writes == [.erase("m1"), .unquoteReplies("m1"), .dropReceipts(Seq(4))])
        let oneWay = try RecallPlan(notice(.oneWay), target: (false, Seq(4)), in: conversation)
        #expect(oneWay.writes == [.keepSenderCopy("m1"), .erase("m1"), .unquoteReplies("m1"), .dropReceipts(Seq(4))])
    }

    @Test("no such message, or one recalled already by someone else, is refused")
    func refusals() {
        #expect(throws: StorageError.conversationNotFound(conversation)) {
            try RecallPlan(notice(.twoWay), target: nil, in: conversation)
        }
        #expect(throws: StorageError.alreadyRecalled) {
            try RecallPlan(notice(.twoWay), target: (true, Seq(4)), in: conversation)
        }
    }
}
