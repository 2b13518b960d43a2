// Courier — Apache-2.0
@testable import CourierWire
import Foundation
import Testing

/// The hand-written reader of the frames that carry messages (`ServerFrameScanner`) must read them exactly as
/// `JSONDecoder` does, and leave everything else to it.
@Suite("Server frames read by hand")
struct ServerFrameScannerTests {
    func jsonDecoder(_ json: String) throws -> ServerFrame { try FrameCoder().decodeServerFrameWithJSONDecoder(json) }

    static func carriesMessages(_ frame: ServerFrame) -> Bool {
        switch frame {
        case .ack(_, .sync), .ack(_, .history), .ack(_, .send), .ack(_, .recall), .ack(_, .edit),
            .ack(_, .createGroup),
            .ack(_, .groupChange), .ack(_, .requestReadReceipts), .event(.message):
            true
        default:
            false
        }
    }

    @Test(
        "golden frames: the scanner reads the ones that carry messages, as JSONDecoder does, and no other",
        arguments: FrameGoldenTests.serverFrames
    )
    func golden(frame: ServerFrame, json: String) throws {
        let scanned = ServerFrameScanner.frame(json)
        #expect((scanned != nil) == Self.carriesMessages(frame))
        if let scanned { #expect(scanned == (try jsonDecoder(json))) }
    }

    @Test("random messages, states and notices in every frame it reads decode as they were sent, by both readers")
    func random() throws {
        var random = Random(seed: 17)
        for _ in 0..<400 {
            let frame = random.frame()
            let text = frame.jsonText
            #expect(ServerFrameScanner.frame(text) == frame, "\(text.prefix(300))")
            #expect(try jsonDecoder(text) == frame)
            #expect(text == (try FrameGoldenTests().foundationJSON(frame)), "the writer writes what JSONEncoder writes")
        }
    }

    @Test("random acks and events of every kind written by hand are the bytes JSONEncoder writes with sorted keys")
    func randomWritten() throws {
        var random = Random(seed: 35)
        for _ in 0..<400 {
            let frame = random.writtenFrame()
            #expect(frame.jsonText == (try FrameGoldenTests().foundationJSON(frame)))
            #expect(try jsonDecoder(frame.jsonText) == frame)
        }
    }

    @Test(
        "valid JSON the server does not write reads as JSONDecoder reads it",
        arguments: [
            // Space everywhere, keys in another order.
            " { \"type\" : \"event\" , \"event\" : \"message\" , \"data\" : { \"message\" : { \"seq\" : 1 , \"id\" : \"m\" , \"conversation\" : \"d:a:b\" , \"clientId\" : \"c\" , \"sender\" : \"a\" , \"time\" : 2 , \"body\" : \"b\" } } } ",
            // Keys out of order (left to JSONDecoder), unknown fields, nulls.
            #"{"data":{"message":{"body":"b","clientId":"c","conversation":"d:a:b","id":"m","seq":1,"sender":"a","time":2,"type":null,"quote":null},"duplicate":false},"id":"1","request":"send","type":"ack"}"#,
            // Numbers the scanner leaves to JSONDecoder.
            #"{"data":{"hasMore":false,"messages":[{"body":"b","clientId":"c","conversation":"d:a:b","id":"m","seq":1.0,"sender":"a","time":2}]},"id":"1","request":"history","type":"ack"}"#,
            // A trailing comma, which JSONDecoder accepts (the scanner leaves it to it).
            #"{"data":{"hasMore":false,"messages":[],},"id":"1","request":"history","type":"ack"}"#,
            // A repeated key, which JSONDecoder reads its own way (found by Fuzz/run): keys out of order are left to it.
            #"{"data":{"duplicate":false,"message":{"body":"b","clientId":"c","conversation":"d:a:b","conversation":"d:b:c","id":"m","seq":1,"sender":"a","time":2}},"id":"1","request":"send","type":"ack"}"#,
            // An escaped key.
            #"{"data":{"hasMore":false,"messages":[],"conversations":[],"s\u0069nce":"x"},"id":"1","request":"sync","type":"ack"}"#,
        ]
    )
    func unusual(json: String) throws {
        // (Whether the scanner reads these is up to it; what it reads must be JSONDecoder's reading.)
        let expected = try jsonDecoder(json)
        if let scanned = ServerFrameScanner.frame(json) { #expect(scanned == expected) }
        #expect(try FrameCoder().decodeServerFrame(json) == expected)
    }

    @Test(
        "what the server may write and the scanner reads by hand: escapes, surrogate pairs, nulls, unknown fields",
        arguments: [
            #"{"data":{"duplicate":false,"extra":{"a":[1,-2.5e3,{"x":null},true,"s"]},"message":{"body":"\u00e9\ud83d\ude00\/\n\"","clientId":"c","conversation":"d:a:b","future":[0,{}],"id":"m","quote":null,"replyTo":null,"sender":"a","seq":-0,"time":2,"type":null}},"id":"1","request":"send","type":"ack"}"#,
            #"{"data":{"conversations":[{"group":null,"id":"d:a:b","kind":"direct","lastSeq":3,"lastTime":4,"members":["a","b"],"receipts":[{"account":"b","delivered":{"seq":1,"time":2},"read":{"seq":1,"time":2},"readSeqs":[3]}],"syncFrom":null,"unreadCount":null}],"hasMore":false,"messages":[],"since":null},"id":"1","request":"sync","type":"ack"}"#,
            "{\"data\":{\"hasMore\":false,\"messages\":[],\"x\":" + String(repeating: "[", count: 60) + String(repeating: "]", count: 60) + "},\"id\":\"1\",\"request\":\"history\",\"type\":\"ack\"}",
        ]
    )
    func readByHand(json: String) throws {
        let scanned = try #require(ServerFrameScanner.frame(json))
        #expect(scanned == (try jsonDecoder(json)))
    }

    @Test("nesting deeper than the scanner goes is left to JSONDecoder, which reads it or refuses it")
    func nesting() throws {
        func frame(depth: Int) -> String {
            #"{"data":{"hasMore":false,"messages":[],"x":"# + String(repeating: "[", count: depth)
                + String(repeating: "]", count: depth) + #"},"id":"1","request":"history","type":"ack"}"#
        }
        #expect(ServerFrameScanner.frame(frame(depth: 100)) == nil)
        #expect(try FrameCoder().decodeServerFrame(frame(depth: 100)) == (try jsonDecoder(frame(depth: 100))))
        // Far past JSONDecoder's own limit: refused, not a crash.
        #expect(ServerFrameScanner.frame(frame(depth: 100_000)) == nil)
        #expect(throws: (any Error).self) { try FrameCoder().decodeServerFrame(frame(depth: 100_000)) }
        #expect(ClientFrameScanner.frame(#"{"type":"ping","id":"1","data":"# + String(repeating: "[", count: 100_000) + "}") == nil)
    }

    @Test(
        "frames that are not right are refused as before: the scanner leaves them to JSONDecoder",
        arguments: [
            #"{"data":{"hasMore":false,"messages":[{"body":"b","clientId":"c","conversation":"d:a:b","id":"m","sender":"a","time":2}]},"id":"1","request":"history","type":"ack"}"#,
            #"{"data":{"hasMore":"no","messages":[]},"id":"1","request":"history","type":"ack"}"#,
            #"{"data":{"hasMore":false,"messages":[]},"id":"1","request":"history","type":"ack"} x"#,
            #"{"data":{"hasMore":false,"messages":[]},"request":"history","type":"ack"}"#,
            #"{"data":{"message":{"body":"b\x","clientId":"c","conversation":"d:a:b","id":"m","seq":1,"sender":"a","time":2}},"event":"message","type":"event"}"#,
            #"{"data":{"conversations":[{"id":"g:x","kind":"channel","members":[],"lastSeq":1,"lastTime":1,"receipts":[]}],"hasMore":false,"messages":[]},"id":"1","request":"sync","type":"ack"}"#,
        ]
    )
    func refused(json: String) {
        #expect(ServerFrameScanner.frame(json) == nil)
        #expect(throws: (any Error).self) { try FrameCoder().decodeServerFrame(json) }
        #expect(throws: (any Error).self) { try jsonDecoder(json) }
    }
}

/// Seeded choices for random frames (SplitMix64), strings with every kind of character JSON escapes.
struct Random {
    private var seed: UInt64
    init(seed: UInt64) { self.seed = seed }

    mutating func next() -> UInt64 {
        seed &+= 0x9E37_79B9_7F4A_7C15
        var z = seed
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    mutating func bool() -> Bool { next() % 2 == 0 }
    mutating func maybe<T>(_ make: (inout Random) -> T) -> T? { bool() ? make(&self) : nil }

    mutating func text() -> String {
        let pieces = ["a", "Z", "9", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "é", "中", "😀", "\u{2028}", "</"]
        return (0..<int(0...12)).map { _ in pieces[int(0...pieces.count - 1)] }.joined()
    }
    mutating func seq() -> Seq { Seq(Int64(int(0...1_000_000))) }
    mutating func time() -> Timestamp { Timestamp(milliseconds: Int64(int(0...2_000_000_000)) * 1000) }
    mutating func account() -> AccountID { AccountID(rawValue: ["alice", "bob", "c.d@e"][int(0...2)]) }
    mutating func accounts() -> [AccountID] { (0..<int(0...3)).map { _ in account() } }
    mutating func role() -> MemberRole { [.owner, .admin, .member][int(0...2)] }
    mutating func watermark() -> Watermark { Watermark(seq: seq(), time: time()) }

    mutating func message() -> WireMessage {
        WireMessage(
            id: MessageID(rawValue: text()),
            conversation: ConversationID(rawValue: text()),
            seq: seq(),
            clientID: ClientMessageID(rawValue: text()),
            sender: account(),
            time: time(),
            type: maybe { $0.text() },
            body: text(),
            replyTo: maybe { MessageID(rawValue: $0.text()) },
            quote: maybe { $0.text() },
            recall: maybe {
                WireRecallNotice(
                    messageID: MessageID(rawValue: $0.text()),
                    sender: $0.account(),
                    recalledBy: $0.account(),
                    mode: $0.bool() ? .twoWay : .oneWay,
                    postscript: $0.maybe { $0.text() },
                    ext: $0.maybe { $0.text() },
                    pushText: $0.maybe { $0.text() },
                    pushPayload: $0.maybe { $0.text() },
                    countsAsUnread: $0.bool()
                )
            },
            recalled: maybe { $0.bool() },
            needsReadReceipt: maybe { $0.bool() },
            group: maybe {
                WireGroupChange(
                    action: [.created, .added, .removed, .left, .roleChanged, .ownerTransferred, .dismissed][$0.int(0...6)],
                    accounts: $0.accounts(),
                    role: $0.maybe { $0.role() }
                )
            },
            receiptRequest: maybe { MessageID(rawValue: $0.text()) }
        )
    }

    mutating func conversationState() -> ConversationState {
        ConversationState(
            id: ConversationID(rawValue: text()),
            kind: bool() ? .direct : .group,
            members: (0..<int(0...3)).map { _ in account() },
            lastSeq: seq(),
            lastTime: time(),
            receipts: (0..<int(0...3)).map { _ in
                MemberReceipts(
                    account: account(),
                    delivered: watermark(),
                    read: watermark(),
                    readSeqs: (0..<int(0...3)).map { _ in seq() }
                )
            },
            unreadCount: maybe { $0.int(0...500) },
            group: maybe { GroupState(memberCount: $0.int(1...100_000), role: $0.role(), joinedSeq: $0.seq()) },
            syncFrom: maybe { $0.seq() }
        )
    }

    /// An ack or event the server writes by hand that carries no message.
    mutating func writtenFrame() -> ServerFrame {
        let id = RequestID(rawValue: text())
        let conversation = ConversationID(rawValue: text())
        let readSeqs = (0..<int(0...3)).map { _ in seq() }
        let state = ReadState(conversation: conversation, watermark: watermark(), readSeqs: readSeqs, unreadCount: int(0...99))
        switch int(0...4) {
        case 0: return .ack(id, .deliver(DeliverAck(conversation: conversation, watermark: watermark())))
        case 1: return .ack(id, .read(state))
        case 2: return .event(.delivered(DeliveredEvent(conversation: conversation, account: account(), watermark: watermark())))
        case 3:
            return .event(.read(ReadEvent(conversation: conversation, account: account(), watermark: watermark(), readSeqs: readSeqs)))
        default: return .event(.readState(ReadStateEvent(state: state, cause: [ReadCause.conversation, .message][int(0...1)])))
        }
    }

    mutating func frame() -> ServerFrame {
        let id = RequestID(rawValue: text())
        let messages = (0..<int(0...4)).map { _ in message() }
        switch int(0...4) {
        case 0:
            let ack = SyncAck(
                conversations: (0..<int(0...3)).map { _ in conversationState() },
                messages: messages,
                hasMore: bool(),
                since: maybe { $0.text() }
            )
            return .ack(id, .sync(ack))
        case 1: return .ack(id, .history(HistoryAck(messages: messages, hasMore: bool())))
        case 2: return .ack(id, .send(SendAck(message: message(), duplicate: bool())))
        case 3: return .ack(id, [Ack.recall, Ack.groupChange, Ack.createGroup][int(0...2)](SendAck(message: message(), duplicate: bool())))
        default: return .event(.message(MessageEvent(message: message())))
        }
    }
}
