// Courier — Apache-2.0
import CourierSDK
import Testing

@Suite("Message status is derived from facts")
struct MessageStatusTests {
    @Test(
        "status of an acknowledged message",
        arguments: [
            (Seq(5), true, Seq(0), false, MessageStatus.sent),
            (5, true, 4, false, .sent),
            (5, true, 5, false, .delivered),
            (5, true, 9, false, .delivered),
            (5, true, 9, true, .read),
            (5, true, 0, true, .read),
            (5, false, 0, false, .delivered),
            (5, false, 0, true, .read),
        ] as [(Seq, Bool, Seq, Bool, MessageStatus)]
    )
    func derive(seq: Seq, isOwn: Bool, delivered: Seq, isRead: Bool, expected: MessageStatus) {
        #expect(MessageStatus.derive(seq: seq, isOwn: isOwn, peerDelivered: delivered, isRead: isRead) == expected)
    }

    @Test("reconnect delays grow exponentially, stay within the cap, and never drop below half")
    func backoff() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(2))
        #expect(backoff.delay(attempt: 0, jitter: 1) == .milliseconds(100))
        #expect(backoff.delay(attempt: 3, jitter: 1) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, jitter: 1) == .seconds(2))
        #expect(backoff.delay(attempt: 3, jitter: 0) == .milliseconds(400))
        #expect(backoff.delay(attempt: 60, jitter: 1) == .seconds(2))
    }

    @Test("errors keep the wire's stable code")
    func errorCodes() {
        #expect(CourierError.bodyTooLarge("x").code == .messageBodyTooLarge)
        #expect(CourierError.notAMember("d:a:b").code == .conversationNotAMember)
        #expect(CourierError.server(code: "future.code", message: "m").code == "future.code")
        #expect(CourierError.timedOut.code == "sdk.timedOut")
    }
}
