// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Testing

@Suite("Delivery receipts end to end", .timeLimit(.minutes(5)))
struct DeliveryReceiptTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("the sender's devices learn that an online recipient stored the message")
    func onlineRecipient() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let alice2 = try await server.connectedClient("alice", device: "tablet")
            _ = try await server.connectedClient("bob")
            let events = alice.events()
            let events2 = alice2.events()

            let sent = try await alice.send("ping", to: conversation).stored()

            for stream in [events, events2] {
                let update = try await stream.first { $0.deliveryUpdate }
                #expect(update.account == "bob" && update.messageIDs == [sent.id] && update.watermark.seq == sent.seq)
            }
            #expect(try await alice.message(sent.id)?.status == .delivered)
        }
    }

    @Test("a recipient who comes online later delivers, and the sender hears of it live")
    func recipientComesOnlineLater() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let events = alice.events()
            let first = try await alice.send("one", to: conversation).stored()
            let second = try await alice.send("two", to: conversation).stored()
            #expect(try await alice.message(second.id)?.status == .sent)

            _ = try await server.connectedClient("bob")

            let update = try await events.first { $0.deliveryUpdate }
            #expect(update.messageIDs == [first.id, second.id])
            #expect(try await alice.message(second.id)?.status == .delivered)
        }
    }

    @Test("a sender who was offline learns of deliveries from the watermark on reconnect")
    func senderOfflineCatchesUp() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.send("while you were away", to: conversation).stored()
            await alice.disconnect()
            let bob = try await server.connectedClient("bob")
            _ = bob
            try await waitForServerDelivery(server, of: "bob", upTo: sent.seq)
            let events = alice.events()

            try await alice.connect(account: "alice", token: try await server.token(for: "alice"))

            let update = try await events.first { $0.deliveryUpdate }
            #expect(update.messageIDs == [sent.id])
            #expect(try await alice.message(sent.id)?.status == .delivered)
        }
    }

    @Test("sendsDeliveryReceipts controls whether a recipient acknowledges", arguments: [true, false])
    func optionTurnsReceiptsOff(sends: Bool) async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            let aliceEvents = alice.events()
            try await alice.send("one", to: conversation).stored()
            let bob = try await server.connectedClient("bob") { $0.sendsDeliveryReceipts = sends }

            // A receipt owed at connect goes out before anything the device sends afterwards, so once bob's reply
            // has reached alice, the server has the receipt if one was sent.
            try await bob.send("reply", to: conversation).stored()
            _ = try await aliceEvents.first { $0.receivedMessage }

            let state = try await server.store.conversation(conversation)
            let delivered = state?.receipts.first { $0.account == "bob" }?.delivered.seq ?? .zero
            #expect(delivered == (sends ? Seq(1) : .zero))
        }
    }

    /// Waits (bounded) until the server has stored `account`'s delivery watermark at `seq` or beyond.
    private func waitForServerDelivery(_ server: TestServer, of account: AccountID, upTo seq: Seq) async throws {
        let probe = try await server.connectedClient("alice", device: "probe")
        let events = probe.events()
        if try await probe.message(try #require(try await probe.messages(in: conversation).last?.id))?.status
            == .delivered
        {
            return
        }
        let update = try await events.first { $0.deliveryUpdate }
        #expect(update.account == account && update.watermark.seq >= seq)
        await probe.disconnect()
    }
}
