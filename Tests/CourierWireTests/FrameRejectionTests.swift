// Courier — Apache-2.0
import CourierWire
import Testing

@Suite("Frames the server cannot accept")
struct FrameRejectionTests {
    @Test(
        "each malformed frame maps to a stable code, keeping the request id when it is readable",
        arguments: [
            ("{not json", nil, ErrorCode.frameInvalid),
            (#"[1,2]"#, nil, .frameInvalid),
            (#"{"type":"send","id":"a"}"#, "a", .frameInvalid),
            (#"{"type":"send","id":"b","data":{"conversation":"d:alice:bob","body":"x"}}"#, "b", .frameInvalid),
            (#"{"type":"send","id":"c","data":{"conversation":5,"clientId":"x","body":"x"}}"#, "c", .frameInvalid),
            (#"{"type":"warp","id":"d","data":{}}"#, "d", .frameUnknownType),
            (#"{"id":"e","data":{}}"#, "e", .frameInvalid),
            // A mistyped field never hides a readable id.
            (#"{"type":true,"id":"t1"}"#, "t1", .frameInvalid),
            (#"{"type":null,"id":"t2","data":{}}"#, "t2", .frameInvalid),
            (#"{"type":["send"],"id":"t3"}"#, "t3", .frameInvalid),
            (#"{"type":"send","id":7}"#, nil, .frameInvalid),
        ] as [(String, RequestID?, ErrorCode)]
    )
    func rejection(text: String, id: RequestID?, code: ErrorCode) {
        guard case .failure(let rejection) = FrameCoder().decodeClientFrame(text) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(rejection.requestID == id)
        #expect(rejection.error.code == code)
    }

    @Test(
        "identifiers are validated as the protocol specifies",
        arguments: [
            ("alice", true), ("a.b_c@d-e", true), ("", false), ("with space", false), ("colon:no", false),
            (String(repeating: "a", count: 128), true), (String(repeating: "a", count: 129), false),
        ]
    )
    func accountValidation(value: String, valid: Bool) {
        #expect(AccountID(rawValue: value).isValid == valid)
    }

    @Test("a direct conversation id names two distinct accounts in ascending order")
    func directConversationIDs() {
        #expect(ConversationID.direct("bob", "alice") == "d:alice:bob")
        #expect(ConversationID(rawValue: "d:alice:bob").peer(of: "alice") == "bob")
        #expect(ConversationID(rawValue: "d:bob:alice").directMembers == nil)
        #expect(ConversationID(rawValue: "d:alice:alice").directMembers == nil)
        #expect(ConversationID(rawValue: "g:team").kind == .group)
        #expect(ConversationID(rawValue: "x:team").kind == nil)
    }
}
