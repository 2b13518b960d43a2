// Courier — Apache-2.0
import CourierWire
import Foundation
import Testing

/// Golden JSON for every frame. Changing an expected string here is a protocol change: update docs/protocol.md too.
@Suite("Frames on the wire")
struct FrameGoldenTests {
    static let message = WireMessage(
        id: "m1",
        conversation: "d:alice:bob",
        seq: 7,
        clientID: "c1",
        sender: "alice",
        time: 1_700_000_000_000,
        body: "hi"
    )
    static let limits = ServerLimits(
        maxFrameBytes: 262_144,
        maxBodyBytes: 65_536,
        maxPageSize: 500,
        outboundQueueFrames: 4096,
        outboundQueueBytes: 8_388_608
    )

    static let clientFrames: [(ClientFrame, String)] = [
        (
            .send("2", SendRequest(conversation: "d:alice:bob", clientID: "c2", body: "hi", ext: ["b": "2", "a": "1"])),
            #"{"type":"send","id":"2","data":{"body":"hi","clientId":"c2","conversation":"d:alice:bob","ext":{"a":"1","b":"2"}}}"#
        ),
        (
            .changeView("4", ChangeViewRequest(conversation: "d:alice:bob", deleteMessageIds: ["m1"], muted: true, hidden: true)),
            #"{"type":"changeView","id":"4","data":{"conversation":"d:alice:bob","deleteMessageIds":["m1"],"hidden":true,"muted":true}}"#
        ),
        (
            .typing("5", TypingRequest(conversation: "g:team", active: false)),
            #"{"type":"typing","id":"5","data":{"active":false,"conversation":"g:team"}}"#
        ),
        (
            .typingSettings("6", TypingSettingsRequest(sendTypingIndicators: false)),
            #"{"type":"typingSettings","id":"6","data":{"sendTypingIndicators":false}}"#
        ),
        (
            .setAccountProfile("7", SetAccountProfileRequest(displayName: "Alice", avatar: "")),
            #"{"type":"setAccountProfile","id":"7","data":{"avatar":"","displayName":"Alice"}}"#
        ),
        (
            .accountProfiles("8", AccountProfilesRequest(since: "p1.abc.7", limit: 2)),
            #"{"type":"accountProfiles","id":"8","data":{"limit":2,"since":"p1.abc.7"}}"#
        ),
        (
            .connect("1", ConnectRequest(token: "JWT", account: "alice", device: "phone")),
            #"{"type":"connect","id":"1","data":{"account":"alice","device":"phone","token":"JWT"}}"#
        ),
        (
            .send("2", SendRequest(conversation: "d:alice:bob", clientID: "c1", body: "hi")),
            #"{"type":"send","id":"2","data":{"body":"hi","clientId":"c1","conversation":"d:alice:bob"}}"#
        ),
        (
            .sync("3", SyncRequest(cursors: ["d:alice:bob": 7], limit: 100, recent: 50)),
            #"{"type":"sync","id":"3","data":{"cursors":{"d:alice:bob":7},"limit":100,"recent":50}}"#
        ),
        (
            .history("4", HistoryRequest(conversation: "d:alice:bob", before: 7, limit: 20)),
            #"{"type":"history","id":"4","data":{"before":7,"conversation":"d:alice:bob","limit":20}}"#
        ),
        (
            .deliver("5", DeliverRequest(conversation: "d:alice:bob", seq: 7)),
            #"{"type":"deliver","id":"5","data":{"conversation":"d:alice:bob","seq":7}}"#
        ),
        (
            .deliver("6", DeliverRequest(conversation: "d:alice:bob", seq: nil, messageID: "m1")),
            #"{"type":"deliver","id":"6","data":{"conversation":"d:alice:bob","messageId":"m1"}}"#
        ),
        (.ping("7"), #"{"type":"ping","id":"7"}"#),
        (
            .read("8", ReadRequest(conversation: "d:alice:bob", messageIDs: ["m1", "m2"])),
            #"{"type":"read","id":"8","data":{"conversation":"d:alice:bob","messageIds":["m1","m2"]}}"#
        ),
        (
            .read("9", ReadRequest(conversation: "d:alice:bob", all: true, isPrivate: true)),
            #"{"type":"read","id":"9","data":{"all":true,"conversation":"d:alice:bob","private":true}}"#
        ),
        (
            .read("10", ReadRequest(conversation: "d:alice:bob", seq: 7)),
            #"{"type":"read","id":"10","data":{"conversation":"d:alice:bob","seq":7}}"#
        ),
        (
            .read("11", ReadRequest(conversation: "d:alice:bob", time: 1_700_000_000_000)),
            #"{"type":"read","id":"11","data":{"conversation":"d:alice:bob","time":1700000000000}}"#
        ),
        (
            .readReceiptSettings(
                "12",
                ReadReceiptSettingsRequest(conversation: "d:alice:bob", sendReadReceipts: false)
            ),
            #"{"type":"readReceiptSettings","id":"12","data":{"conversation":"d:alice:bob","sendReadReceipts":false}}"#
        ),
        (.unread("13"), #"{"type":"unread","id":"13"}"#),
        (
            .recall(
                "14",
                RecallRequest(conversation: "d:alice:bob", messageID: "m1", mode: .oneWay, postscript: "typo")
            ),
            #"{"type":"recall","id":"14","data":{"conversation":"d:alice:bob","messageId":"m1","mode":"oneWay","postscript":"typo"}}"#
        ),
        (
            .edit(
                "16",
                EditRequest(conversation: "d:alice:bob", messageID: "m1", clientID: "e1", body: "hi!", ext: ["k": "v"])
            ),
            #"{"type":"edit","id":"16","data":{"body":"hi!","clientId":"e1","conversation":"d:alice:bob","ext":{"k":"v"},"messageId":"m1"}}"#
        ),
        (
            .react("17", ReactRequest(conversation: "g:crew", messageID: "m1", reaction: "👍", remove: true)),
            #"{"type":"react","id":"17","data":{"conversation":"g:crew","messageId":"m1","reaction":"👍","remove":true}}"#
        ),
        (
            .reactionList("18", ReactionListRequest(conversation: "g:crew", messageID: "m1", reaction: "👍", limit: 10)),
            #"{"type":"reactionList","id":"18","data":{"conversation":"g:crew","limit":10,"messageId":"m1","reaction":"👍"}}"#
        ),
        (
            .send("15", SendRequest(conversation: "d:alice:bob", clientID: "c2", body: "re", replyTo: "m1")),
            #"{"type":"send","id":"15","data":{"body":"re","clientId":"c2","conversation":"d:alice:bob","replyTo":"m1"}}"#
        ),
    ]

    static let notice = WireMessage(
        id: "n1",
        conversation: "d:alice:bob",
        seq: 8,
        clientID: "recall:m1",
        sender: "alice",
        time: 1_700_000_000_001,
        body: "",
        recall: WireRecallNotice(messageID: "m1", sender: "alice", recalledBy: "alice", mode: .twoWay, postscript: "ps")
    )
    static let noticeJSON =
        #"{"body":"","clientId":"recall:m1","conversation":"d:alice:bob","id":"n1","recall":{"countsAsUnread":false,"messageId":"m1","mode":"twoWay","postscript":"ps","recalledBy":"alice","sender":"alice"},"sender":"alice","seq":8,"time":1700000000001}"#
    /// An edit entry, and an edited message as history answers it.
    static let editEntry = WireMessage(
        id: "e9",
        conversation: "d:alice:bob",
        seq: 10,
        clientID: "e1",
        sender: "alice",
        time: 1_700_000_000_003,
        body: "hi!",
        edit: WireEditNotice(messageID: "m1", sender: "alice", editedBy: "alice")
    )
    static let editEntryJSON =
        #"{"body":"hi!","clientId":"e1","conversation":"d:alice:bob","edit":{"editedBy":"alice","messageId":"m1","sender":"alice"},"id":"e9","sender":"alice","seq":10,"time":1700000000003}"#
    static let edited = WireMessage(
        id: "m1",
        conversation: "d:alice:bob",
        seq: 7,
        clientID: "c1",
        sender: "alice",
        time: 1_700_000_000_000,
        body: "hi!",
        editedAt: 1_700_000_000_003
    )
    static let editedJSON =
        #"{"body":"hi!","clientId":"c1","conversation":"d:alice:bob","editedAt":1700000000003,"id":"m1","sender":"alice","seq":7,"time":1700000000000}"#
    static let reply = WireMessage(
        id: "m2",
        conversation: "d:alice:bob",
        seq: 9,
        clientID: "c2",
        sender: "bob",
        time: 1_700_000_000_002,
        body: "re",
        replyTo: "m1",
        quote: "hi",
        recalled: true
    )
    static let replyJSON =
        #"{"body":"re","clientId":"c2","conversation":"d:alice:bob","id":"m2","quote":"hi","recalled":true,"replyTo":"m1","sender":"bob","seq":9,"time":1700000000002}"#

    static let readState = ReadState(
        conversation: "d:alice:bob",
        watermark: Watermark(seq: 5, time: 9),
        readSeqs: [7, 9],
        unreadCount: 2
    )
    static let readStateJSON =
        #"{"conversation":"d:alice:bob","readSeqs":[7,9],"unreadCount":2,"watermark":{"seq":5,"time":9}}"#

    static let messageJSON =
        #"{"body":"hi","clientId":"c1","conversation":"d:alice:bob","id":"m1","sender":"alice","seq":7,"time":1700000000000}"#

    static let serverFrames: [(ServerFrame, String)] = [
        (
            .event(
                .message(
                    MessageEvent(
                        message: WireMessage(
                            id: "m9", conversation: "d:alice:bob", seq: 9, clientID: "c9", sender: "alice", time: 9,
                            body: "hi", ext: ["z": "last", "a": "first \"quoted\""]
                        )
                    )
                )
            ),
            #"{"data":{"message":{"body":"hi","clientId":"c9","conversation":"d:alice:bob","ext":{"a":"first \"quoted\"","z":"last"},"id":"m9","sender":"alice","seq":9,"time":9}},"event":"message","type":"event"}"#
        ),
        (
            .event(.view(ViewEvent(conversation: "d:alice:bob", view: ConversationView(cleared: 3, deletedSeqs: [5], muted: true, pinnedAt: 7, hiddenUpTo: 9)))),
            #"{"data":{"conversation":"d:alice:bob","view":{"cleared":3,"deletedSeqs":[5],"hiddenUpTo":9,"muted":true,"pinnedAt":7}},"event":"view","type":"event"}"#
        ),
        (
            .event(.typing(TypingEvent(conversation: "g:team", account: "alice", active: true, expiresInMs: 6000))),
            #"{"data":{"account":"alice","active":true,"conversation":"g:team","expiresInMs":6000},"event":"typing","type":"event"}"#
        ),
        (
            .ack("5", .typing(TypingAck(shown: true, expiresInMs: 6000))),
            #"{"data":{"expiresInMs":6000,"shown":true},"id":"5","request":"typing","type":"ack"}"#
        ),
        (
            .ack("6", .typingSettings(TypingSettings(sendTypingIndicators: false, serverShowsTyping: true))),
            #"{"data":{"sendTypingIndicators":false,"serverShowsTyping":true},"id":"6","request":"typingSettings","type":"ack"}"#
        ),
        (
            .event(.accountProfile(AccountProfile(account: "alice", displayName: "Alice", ext: ["k": "v"], version: 12, updatedAt: 5))),
            #"{"data":{"account":"alice","displayName":"Alice","ext":{"k":"v"},"updatedAt":5,"version":12},"event":"accountProfile","type":"event"}"#
        ),
        (
            .ack("7", .accountProfiles(AccountProfilesAck(profiles: [AccountProfile(account: "bob", version: 3)], cursor: "p1.abc.9"))),
            #"{"data":{"cursor":"p1.abc.9","hasMore":false,"profiles":[{"account":"bob","version":3}]},"id":"7","request":"accountProfiles","type":"ack"}"#
        ),
        (
            .ack(
                "17",
                .react(
                    WireReactions(messageID: "m1", counts: [ReactionCount(reaction: "👍", count: 2)], mine: ["👍"], version: 9)
                )
            ),
            #"{"data":{"counts":[{"count":2,"reaction":"👍"}],"messageId":"m1","mine":["👍"],"version":9},"id":"17","request":"react","type":"ack"}"#
        ),
        (
            .event(
                .reaction(
                    ReactionEvent(
                        conversation: "g:crew", messageID: "m1", account: "bob", reaction: "👍", added: true,
                        counts: [ReactionCount(reaction: "👍", count: 2)], version: 9
                    )
                )
            ),
            #"{"data":{"account":"bob","added":true,"conversation":"g:crew","counts":[{"count":2,"reaction":"👍"}],"messageId":"m1","reaction":"👍","version":9},"event":"reaction","type":"event"}"#
        ),
        (
            .ack("16", .edit(SendAck(message: editEntry, duplicate: false))),
            #"{"data":{"duplicate":false,"message":\#(editEntryJSON)},"id":"16","request":"edit","type":"ack"}"#
        ),
        (
            .event(.message(MessageEvent(message: edited))),
            #"{"data":{"message":\#(editedJSON)},"event":"message","type":"event"}"#
        ),
        (
            .ack(
                "1",
                .connect(
                    ConnectAck(
                        account: "alice",
                        device: "phone",
                        serverTime: 5,
                        limits: ServerLimits(
                            maxFrameBytes: 262_144,
                            maxBodyBytes: 65_536,
                            maxPageSize: 500,
                            outboundQueueFrames: 4096,
                            outboundQueueBytes: 8_388_608,
                            maxRequestsInFlight: 32,
                            recallWindowMilliseconds: 120_000,
                            managerRecallWindowMilliseconds: 86_400_000,
                            editWindowMilliseconds: 86_400_000
                        )
                    )
                )
            ),
            #"{"data":{"account":"alice","device":"phone","limits":{"editWindowMilliseconds":86400000,"managerRecallWindowMilliseconds":86400000,"maxBodyBytes":65536,"maxFrameBytes":262144,"maxPageSize":500,"maxRequestsInFlight":32,"outboundQueueBytes":8388608,"outboundQueueFrames":4096,"recallWindowMilliseconds":120000},"readReceiptPolicy":"userChoice","serverTime":5},"id":"1","request":"connect","type":"ack"}"#
        ),
        (
            .ack("1", .connect(ConnectAck(account: "alice", device: "phone", serverTime: 5, limits: limits))),
            #"{"data":{"account":"alice","device":"phone","limits":{"maxBodyBytes":65536,"maxFrameBytes":262144,"maxPageSize":500,"outboundQueueBytes":8388608,"outboundQueueFrames":4096},"readReceiptPolicy":"userChoice","serverTime":5},"id":"1","request":"connect","type":"ack"}"#
        ),
        (
            .ack("2", .send(SendAck(message: message, duplicate: false))),
            #"{"data":{"duplicate":false,"message":\#(messageJSON)},"id":"2","request":"send","type":"ack"}"#
        ),
        (
            .ack(
                "3",
                .sync(
                    SyncAck(
                        conversations: [
                            ConversationState(
                                id: "d:alice:bob",
                                kind: .direct,
                                members: ["alice", "bob"],
                                lastSeq: 7,
                                lastTime: 9,
                                receipts: [
                                    MemberReceipts(
                                        account: "bob",
                                        delivered: Watermark(seq: 7, time: 9),
                                        read: Watermark(seq: 2, time: 3),
                                        readSeqs: [5]
                                    )
                                ],
                                unreadCount: 4,
                                syncFrom: 2,
                                view: ConversationView(cleared: 1, deletedSeqs: [3], muted: true)
                            )
                        ],
                        messages: [message],
                        hasMore: false
                    )
                )
            ),
            #"{"data":{"conversations":[{"id":"d:alice:bob","kind":"direct","lastSeq":7,"lastTime":9,"members":["alice","bob"],"receipts":[{"account":"bob","delivered":{"seq":7,"time":9},"read":{"seq":2,"time":3},"readSeqs":[5]}],"syncFrom":2,"unreadCount":4,"view":{"cleared":1,"deletedSeqs":[3],"muted":true}}],"hasMore":false,"messages":[\#(messageJSON)]},"id":"3","request":"sync","type":"ack"}"#
        ),
        (
            .ack("4", .history(HistoryAck(messages: [message], hasMore: true))),
            #"{"data":{"hasMore":true,"messages":[\#(messageJSON)]},"id":"4","request":"history","type":"ack"}"#
        ),
        (
            .ack("5", .deliver(DeliverAck(conversation: "d:alice:bob", watermark: Watermark(seq: 7, time: 9)))),
            #"{"data":{"conversation":"d:alice:bob","watermark":{"seq":7,"time":9}},"id":"5","request":"deliver","type":"ack"}"#
        ),
        (
            .ack("8", .read(readState)),
            #"{"data":\#(readStateJSON),"id":"8","request":"read","type":"ack"}"#
        ),
        (
            .ack(
                "12",
                .readReceiptSettings(
                    ReadReceiptSettings(
                        policy: .userChoice,
                        sendReadReceipts: true,
                        conversations: ["d:alice:bob": false]
                    )
                )
            ),
            #"{"data":{"conversations":{"d:alice:bob":false},"policy":"userChoice","sendReadReceipts":true},"id":"12","request":"readReceiptSettings","type":"ack"}"#
        ),
        (
            .ack("13", .unread(UnreadAck(conversations: ["d:alice:bob": 3], total: 3))),
            #"{"data":{"conversations":{"d:alice:bob":3},"total":3},"id":"13","request":"unread","type":"ack"}"#
        ),
        (
            .ack("14", .recall(SendAck(message: notice, duplicate: false))),
            #"{"data":{"duplicate":false,"message":\#(noticeJSON)},"id":"14","request":"recall","type":"ack"}"#
        ),
        (
            .event(.message(MessageEvent(message: reply))),
            #"{"data":{"message":\#(replyJSON)},"event":"message","type":"event"}"#
        ),
        (
            .ack("7", .ping(PingAck(serverTime: 5))),
            #"{"data":{"serverTime":5},"id":"7","request":"ping","type":"ack"}"#
        ),
        (
            .error("2", WireError(code: .messageBodyTooLarge, message: "The body exceeds 65536 bytes.")),
            #"{"error":{"code":"message.bodyTooLarge","message":"The body exceeds 65536 bytes."},"id":"2","type":"error"}"#
        ),
        (
            .error(nil, WireError(code: .frameInvalid, message: "The frame is not a valid JSON object.")),
            #"{"error":{"code":"frame.invalid","message":"The frame is not a valid JSON object."},"type":"error"}"#
        ),
        (
            .event(.message(MessageEvent(message: message))),
            #"{"data":{"message":\#(messageJSON)},"event":"message","type":"event"}"#
        ),
        (
            .event(
                .delivered(
                    DeliveredEvent(conversation: "d:alice:bob", account: "bob", watermark: Watermark(seq: 7, time: 9))
                )
            ),
            #"{"data":{"account":"bob","conversation":"d:alice:bob","watermark":{"seq":7,"time":9}},"event":"delivered","type":"event"}"#
        ),
        (
            .event(
                .read(
                    ReadEvent(
                        conversation: "d:alice:bob",
                        account: "bob",
                        watermark: Watermark(seq: 5, time: 9),
                        readSeqs: [7]
                    )
                )
            ),
            #"{"data":{"account":"bob","conversation":"d:alice:bob","readSeqs":[7],"watermark":{"seq":5,"time":9}},"event":"read","type":"event"}"#
        ),
        (
            .event(.readState(ReadStateEvent(state: readState, cause: .conversation))),
            #"{"data":{"cause":"conversation","state":\#(readStateJSON)},"event":"readState","type":"event"}"#
        ),
        (.event(.syncRequired(SyncRequiredEvent())), #"{"data":{},"event":"syncRequired","type":"event"}"#),
        (
            .event(
                .groupReceipts(
                    GroupReceiptsEvent(
                        conversation: "g:team",
                        updates: [
                            GroupReceiptUpdate(
                                messageID: "m1",
                                seq: 3,
                                readers: ["bob": 9, "Zoe": 8, "amy": 7],
                                contents: ["bob": "on \"it\"", "amy": "👍"],
                                readCount: 3,
                                unreadCount: 1
                            ),
                            GroupReceiptUpdate(
                                messageID: "m2",
                                seq: 4,
                                readers: ["bob": 9],
                                readCount: 1,
                                unreadCount: 3
                            ),
                        ]
                    )
                )
            ),
            #"{"data":{"conversation":"g:team","updates":[{"contents":{"amy":"👍","bob":"on \"it\""},"messageId":"m1","readCount":3,"readers":{"Zoe":8,"amy":7,"bob":9},"seq":3,"unreadCount":1},{"messageId":"m2","readCount":1,"readers":{"bob":9},"seq":4,"unreadCount":3}]},"event":"groupReceipts","type":"event"}"#
        ),
    ]

    @Test("client frames encode to their golden JSON and decode back", arguments: clientFrames)
    func clientFrame(frame: ClientFrame, json: String) throws {
        let coder = FrameCoder()
        #expect(try coder.encode(frame) == json)
        #expect(try coder.decodeClientFrame(json).get() == frame)
    }

    @Test("server frames encode to their golden JSON, by both encoders, and decode back", arguments: serverFrames)
    func serverFrame(frame: ServerFrame, json: String) throws {
        let coder = FrameCoder()
        #expect(coder.encode(frame) == json)
        #expect(try foundationJSON(frame) == json)
        #expect(try coder.decodeServerFrame(json) == frame)
    }

    @Test(
        "the fast server-frame encoder escapes every string so that it decodes back unchanged",
        arguments: [
            "plain", "quote \" and backslash \\", "line\nbreak\r\ttab", "\u{08}\u{0C}\u{00}\u{01}\u{1F}",
            "emoji 😀 中文 ⌘",
            "slash / and </script>", "\u{2028}\u{2029}", "",
        ]
    )
    func escaping(body: String) throws {
        let message = WireMessage(
            id: "m\"1",
            conversation: "d:a:b",
            seq: 1,
            clientID: "c\\1",
            sender: "a",
            time: 2,
            body: body
        )
        let frame = ServerFrame.event(.message(MessageEvent(message: message)))
        let text = FrameCoder().encode(frame)
        #expect(try FrameCoder().decodeServerFrame(text) == frame)
        #expect(text == (try foundationJSON(frame)))
    }

    /// The frame through Foundation's `JSONEncoder` (the generic path), to compare with the fast encoder.
    func foundationJSON<Frame: Encodable>(_ frame: Frame) throws -> String { try FrameCoder().encode(frame) }

    @Test("unknown fields such as server-assigned ones in a send are ignored, not trusted")
    func serverFieldsIgnored() throws {
        let json =
            #"{"type":"send","id":"9","data":{"conversation":"d:alice:bob","clientId":"c","body":"b","seq":99,"sender":"mallory","id":"x","time":1}}"#
        #expect(
            try FrameCoder().decodeClientFrame(json).get()
                == .send("9", SendRequest(conversation: "d:alice:bob", clientID: "c", body: "b"))
        )
    }
}
