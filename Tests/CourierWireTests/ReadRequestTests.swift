// Courier — Apache-2.0
import CourierWire
import Testing

@Suite("Read receipts: what a request covers and who shares it")
struct ReadRequestTests {
    @Test(
        "a read request names exactly one of messageIds, seq, time and all",
        arguments: [
            (ReadRequest(conversation: "d:a:b", messageIDs: ["m"]), ReadTarget.messages(["m"])),
            (ReadRequest(conversation: "d:a:b", seq: 3), .upTo(3)),
            (ReadRequest(conversation: "d:a:b", time: 9), .upToTime(9)),
            (ReadRequest(conversation: "d:a:b", all: true), .all),
            (ReadRequest(conversation: "d:a:b"), nil),
            (ReadRequest(conversation: "d:a:b", all: false), nil),
            (ReadRequest(conversation: "d:a:b", seq: 3, all: true), nil),
            (ReadRequest(conversation: "d:a:b", messageIDs: ["m"], time: 9), nil),
        ] as [(ReadRequest, ReadTarget?)]
    )
    func target(request: ReadRequest, expected: ReadTarget?) {
        #expect(request.target == expected)
    }

    @Test("the policy overrides the account, and a conversation's setting overrides the account's")
    func sharing() {
        let settings = { (policy: ReadReceiptPolicy) in
            ReadReceiptSettings(policy: policy, sendReadReceipts: false, conversations: ["d:a:b": true])
        }
        #expect(settings(.userChoice).sharesReads(in: "d:a:b"))
        #expect(!settings(.userChoice).sharesReads(in: "d:a:c"))
        #expect(settings(.alwaysOn).sharesReads(in: "d:a:c"))
        #expect(!settings(.alwaysOff).sharesReads(in: "d:a:b"))
    }
}
