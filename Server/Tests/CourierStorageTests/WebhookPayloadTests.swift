// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierWire
import Foundation
import Testing

/// Webhook payloads are written by hand in the writer's transaction (the frames' JSON writer): a receiver parsing them
/// with any JSON library gets the documented fields, also for text that needs escaping.
@Suite("Webhook payloads")
struct WebhookPayloadTests {
    struct Envelope<Data: Decodable>: Decodable {
        let type: String
        let timestamp: String
        let data: Data
    }

    struct EntryData: Decodable {
        let message: WireMessage
    }

    @Test("message.created carries the message as the wire has it, whatever its text")
    func entry() throws {
        let message = WireMessage(
            id: MessageID(rawValue: "m1"),
            conversation: ConversationID(rawValue: "d:alice:bob"),
            seq: Seq(rawValue: 42),
            clientID: ClientMessageID(rawValue: "c-\"1\""),
            sender: AccountID(rawValue: "alice"),
            time: Timestamp(milliseconds: 1_795_000_000_123),
            type: "app/x",
            body: "line\none \\ \"quoted\" \u{01} 表情 😀 </script>",
            replyTo: MessageID(rawValue: "m0"),
            quote: "q\t",
            needsReadReceipt: true
        )
        let drafts = try #require(
            AppendOutcome(appended: message, membershipSeq: nil, announcement: .everyone).change
        ).webhookEvents
        #expect(drafts.map(\.type) == [.messageCreated, .messageUndelivered])
        let draft = try #require(drafts.first)
        let decoded = try JSONDecoder().decode(Envelope<EntryData>.self, from: Data(draft.payload.utf8))
        #expect(decoded.type == "message.created" && draft.type == .messageCreated)
        #expect(decoded.data.message == message)
        #expect(decoded.timestamp == "2026-11-18T11:06:40.123Z")
        #expect(draft.id.hasPrefix("evt_") && draft.id.count == 36)
        #expect(AppendOutcome(duplicateOf: message).change == nil, "a duplicate reports nothing")
        // A purge's notices are not pushed; imported history is announced to nobody, nor told to other nodes.
        #expect(
            AppendOutcome(appended: message, membershipSeq: nil, announcement: .withoutPush).change?.webhookEvents
                .map(\.type) == [.messageCreated]
        )
        #expect(AppendOutcome(appended: message, membershipSeq: nil, announcement: .nobody).change == nil)
        // The ids are made from the events alone: the same change names its events alike, another change otherwise.
        let again = try #require(AppendOutcome(appended: message, membershipSeq: nil, announcement: .everyone).change)
        #expect(again.webhookEvents.map(\.id) == drafts.map(\.id) && Set(drafts.map(\.id)).count == 2)
        let edited = WireMessage(
            id: MessageID(rawValue: "m2"), conversation: message.conversation, seq: Seq(rawValue: 43),
            clientID: ClientMessageID(rawValue: "c2"), sender: message.sender, time: message.time, body: message.body
        )
        let other = try #require(AppendOutcome(appended: edited, membershipSeq: nil, announcement: .everyone).change)
        #expect(Set(other.webhookEvents.map(\.id)).isDisjoint(with: drafts.map(\.id)))

        // message.undelivered: its own queue, and the recipients added when it is delivered.
        let undelivered = drafts[1]
        #expect(undelivered.conversation.rawValue == "push:d:alice:bob")
        let token = PushToken(
            device: DeviceID(rawValue: "phone"),
            platform: .apns,
            token: "3f1c",
            sandbox: true,
            updatedAt: Timestamp(milliseconds: 5)
        )
        let body = WebhookEvents.undeliveredPayload(
            stored: undelivered.payload,
            createdAt: message.time,
            recipients: [PushRecipient(account: AccountID(rawValue: "bob"), tokens: [token])],
            nextCursor: AccountID(rawValue: "bob")
        )
        struct UndeliveredData: Decodable {
            let message: WireMessage
            let recipients: [PushRecipient]
            let nextCursor: String?
        }
        let parsed = try JSONDecoder().decode(Envelope<UndeliveredData>.self, from: Data(body.utf8))
        #expect(parsed.type == "message.undelivered" && parsed.data.message == message)
        #expect(parsed.data.recipients == [PushRecipient(account: AccountID(rawValue: "bob"), tokens: [token])])
        #expect(parsed.data.nextCursor == "bob")
    }

    @Test("message.read and message.delivered name the account, the conversation and the watermark")
    func readAndDelivered() throws {
        let conversation = ConversationID(rawValue: "d:alice:bob")
        let watermark = Watermark(seq: Seq(rawValue: 7), time: Timestamp(milliseconds: 1_795_000_000_000))
        let resolved = ResolvedRead(
            reader: AccountID(rawValue: "bob"),
            conversation: conversation,
            target: .upTo(Seq(rawValue: 7)),
            isShared: true,
            time: watermark.time
        )
        let change = ReadOutcome(
            own: ReadState(conversation: conversation, watermark: watermark, readSeqs: [], unreadCount: 0),
            ownChanged: true,
            shared: MemberReceipts(account: AccountID(rawValue: "bob"), delivered: watermark, read: watermark, readSeqs: [9])
        )
        let read = try #require(Change.read(resolved, change)?.webhookEvents.first)
        let readJSON = try #require(JSONSerialization.jsonObject(with: Data(read.payload.utf8)) as? [String: Any])
        let readData = try #require(readJSON["data"] as? [String: Any])
        #expect(readJSON["type"] as? String == "message.read")
        #expect(readData["reader"] as? String == "bob" && readData["conversation"] as? String == "d:alice:bob")
        #expect((readData["read"] as? [String: Any])?["seq"] as? Int == 7)
        #expect(readData["readSeqs"] as? [Int] == [9])
        #expect(readData["receipts"] == nil)
        // An imported read is told to nobody: no event, no change for the other nodes.
        var imported = resolved
        imported.isAnnounced = false
        #expect(Change.read(imported, change) == nil && Change.read(resolved, change) != nil)

        let delivered = try #require(
            DeliveryOutcome(AccountID(rawValue: "bob"), in: conversation, watermark: watermark, advanced: true, at: watermark.time)
                .change?.webhookEvents.first
        )
        let deliveredJSON = try #require(JSONSerialization.jsonObject(with: Data(delivered.payload.utf8)) as? [String: Any])
        let deliveredData = try #require(deliveredJSON["data"] as? [String: Any])
        #expect(deliveredJSON["type"] as? String == "message.delivered")
        #expect(deliveredData["account"] as? String == "bob")
        #expect((deliveredData["delivered"] as? [String: Any])?["time"] as? Int == 1_795_000_000_000)
        #expect(
            DeliveryOutcome(AccountID(rawValue: "bob"), in: conversation, watermark: watermark, advanced: false, at: watermark.time)
                .change == nil
        )
    }
}
