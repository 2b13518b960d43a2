// Courier — Apache-2.0
@testable import CourierWire
import Foundation
import Testing

/// The hand-written reader of the requests a server reads most (`ClientFrameScanner`) must read them exactly as
/// `JSONDecoder` does, and leave everything else — rejections included — to it.
@Suite("Client frames read by hand")
struct ClientFrameScannerTests {
    func jsonDecoder(_ json: String) -> ClientFrame? { try? FrameCoder().decodeClientFrameWithJSONDecoder(json).get() }

    static func isHot(_ frame: ClientFrame) -> Bool {
        switch frame {
        case .send, .read, .deliver, .unread, .ping: true
        default: false
        }
    }

    @Test(
        "golden frames: the scanner reads send, read, deliver, unread and ping as JSONDecoder does, and no other",
        arguments: FrameGoldenTests.clientFrames
    )
    func golden(frame: ClientFrame, json: String) {
        let scanned = ClientFrameScanner.frame(json)
        #expect((scanned != nil) == Self.isHot(frame))
        if let scanned { #expect(scanned == jsonDecoder(json)) }
    }

    @Test("random requests decode as they were sent, by both readers")
    func random() throws {
        var random = Random(seed: 29)
        for _ in 0..<400 {
            let id = RequestID(rawValue: random.text())
            let conversation = ConversationID(rawValue: random.text())
            let frame: ClientFrame
            switch random.int(0...2) {
            case 0:
                frame = .send(
                    id,
                    SendRequest(
                        conversation: conversation,
                        clientID: ClientMessageID(rawValue: random.text()),
                        type: random.maybe { $0.text() },
                        body: random.text(),
                        replyTo: random.maybe { MessageID(rawValue: $0.text()) },
                        needsReadReceipt: random.maybe { $0.bool() }
                    )
                )
            case 1:
                frame = .read(
                    id,
                    ReadRequest(
                        conversation: conversation,
                        messageIDs: random.maybe { r in (0..<r.int(0...3)).map { _ in MessageID(rawValue: r.text()) } },
                        seq: random.maybe { $0.seq() },
                        time: random.maybe { $0.time() },
                        all: random.maybe { $0.bool() },
                        isPrivate: random.maybe { $0.bool() },
                        content: random.maybe { $0.text() }
                    )
                )
            default:
                frame = .deliver(
                    id,
                    DeliverRequest(
                        conversation: conversation,
                        seq: random.maybe { $0.seq() },
                        messageID: random.maybe { MessageID(rawValue: $0.text()) }
                    )
                )
            }
            let text = try FrameCoder().encode(frame)
            #expect(ClientFrameScanner.frame(text) == frame, "\(text.prefix(300))")
            #expect(jsonDecoder(text) == frame)
        }
    }

    @Test(
        "valid JSON written otherwise reads as JSONDecoder reads it",
        arguments: [
            // `data` first, space, keys of `data` in another order (left to JSONDecoder), unknown fields.
            #" { "data" : { "conversation" : "d:a:b" , "body" : "b" , "clientId" : "c" } , "id" : "1" , "type" : "send" } "#,
            #"{"id":"2","type":"read","data":{"all":true,"conversation":"d:a:b","extra":[1,{"x":2.5e1}],"private":null}}"#,
            #"{"type":"unread","id":"3","data":{"ignored":true}}"#,
            #"{"type":"deliver","id":"4","data":{"conversation":"d:a:b","seq":1.0}}"#,
            #"{"type":"deliver","id":"5","data":{"conversation":"d:a:b","conversation":"d:a:c","seq":1}}"#,
            #"{"type":"send","id":"6","data":{"body":"\u00e9\ud83d\ude00\/","clientId":"c","conversation":"d:a:b"},}"#,
        ]
    )
    func unusual(json: String) throws {
        let expected = try #require(jsonDecoder(json))
        if let scanned = ClientFrameScanner.frame(json) { #expect(scanned == expected) }
        #expect(try FrameCoder().decodeClientFrame(json).get() == expected)
    }

    @Test(
        "frames that are not right get the same rejection as before: the scanner leaves them to JSONDecoder",
        arguments: [
            #"{"type":"send","id":"1","data":{"body":"b","conversation":"d:a:b"}}"#,
            #"{"type":"send","id":"1","data":{"body":7,"clientId":"c","conversation":"d:a:b"}}"#,
            #"{"type":"send","id":"1"}"#,
            #"{"type":"send","type":"read","id":"1","data":{"conversation":"d:a:b","all":true}}"#,
            #"{"type":"read","data":{"all":true,"conversation":"d:a:b"}}"#,
            #"{"type":"teleport","id":"1"}"#,
            #"{"type":"ping","id":"1"} trailing"#,
        ]
    )
    func refused(json: String) {
        #expect(ClientFrameScanner.frame(json) == nil)
        let before = FrameCoder().decodeClientFrameWithJSONDecoder(json)
        let now = FrameCoder().decodeClientFrame(json)
        switch (before, now) {
        case (.failure(let old), .failure(let new)):
            #expect(old.error == new.error && old.requestID == new.requestID)
        case (.success(let old), .success(let new)):
            #expect(old == new)
        default:
            Issue.record("decodes differently: \(before) and \(now)")
        }
    }
}
