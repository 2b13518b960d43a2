import Foundation
import GRDB
import Testing

// Courier — Apache-2.0
@testable import CourierSDK
import CourierWire

/// The inbound pipeline: each frame is one idempotent transaction that reports only what changed.
@Suite("Local store inbound pipeline")
struct LocalStoreTests {
    let conversation = ConversationID.direct("alice", "bob")

    func message(_ seq: Int64, from sender: AccountID = "bob") -> WireMessage {
        WireMessage(
            id: MessageID(rawValue: "m\(seq)"),
            conversation: conversation,
            seq: Seq(seq),
            clientID: ClientMessageID(rawValue: "c\(seq)"),
            sender: sender,
            time: Timestamp(milliseconds: seq * 10),
            body: "b\(seq)"
        )
    }

    /// Applies a frame and returns the changes its transaction published at commit.
    func applied(_ body: (@escaping LocalStore.Publish) async throws -> Void) async throws -> InboundChanges {
        let box = Locked(InboundChanges())
        try await body { changes in box.withLock { $0.merge(changes) } }
        return box.withLock { $0 }
    }

    func apply(_ message: WireMessage, to store: LocalStore) async throws -> InboundChanges {
        try await applied { try await store.apply([message], arrival: .online, me: "alice", then: $0) }
    }

    @Test("the same message applied twice is stored and reported once")
    func duplicate() async throws {
        let store = try LocalStore(location: .inMemory)
        let first = try await apply(message(1), to: store)
        let second = try await apply(message(1), to: store)
        #expect(first.received.map(\.id) == ["m1"])
        #expect(second.received.isEmpty && second.receiptsDue.isEmpty)
        #expect(try await store.messages(in: conversation, before: nil, limit: 10, me: "alice").count == 1)
    }

    @Test("a message past a gap is held back, and reported in order once the gap is filled")
    func gap() async throws {
        let store = try LocalStore(location: .inMemory)
        _ = try await apply(message(1), to: store)
        let early = try await apply(message(3), to: store)
        #expect(early.received.isEmpty && early.gaps == [conversation])
        let gap = try await store.gap(in: conversation)
        #expect(gap?.after == 1 && gap?.before == 3, "held without a gap up to 1, next held 3")
        let filled = try await apply(message(2), to: store)
        #expect(filled.received.map(\.seq) == [2, 3])
        #expect(filled.gaps.isEmpty)
        #expect(try await store.gap(in: conversation) == nil)
        #expect(try await store.cursors() == [conversation: 3])
    }

    @Test("a delivery receipt is due for a peer's message, not for one's own")
    func receiptsDue() async throws {
        let store = try LocalStore(location: .inMemory)
        let own = try await apply(message(1, from: "alice"), to: store)
        #expect(own.receiptsDue.isEmpty)
        let peer = try await apply(message(2), to: store)
        #expect(peer.receiptsDue == [conversation: 2])
        try await store.markDeliveryAcknowledged(conversation, upTo: 2)
        #expect(try await store.dueDeliveryReceipts(me: "alice").isEmpty)
    }

    @Test("a peer's delivery watermark marks one's own messages delivered, once")
    func deliveryUpdate() async throws {
        let store = try LocalStore(location: .inMemory)
        _ = try await apply(message(1, from: "alice"), to: store)
        _ = try await apply(message(2, from: "alice"), to: store)
        let event = DeliveredEvent(conversation: conversation, account: "bob", watermark: Watermark(seq: 2, time: 20))
        let first = try await applied { try await store.apply(event, me: "alice", then: $0) }
        let again = try await applied { try await store.apply(event, me: "alice", then: $0) }
        #expect(first.deliveries.map(\.messageIDs) == [["m1", "m2"]])
        #expect(again.deliveries.isEmpty)
        let statuses = try await store.messages(in: conversation, before: nil, limit: 10, me: "alice").map(\.status)
        #expect(statuses == [.delivered, .delivered])
    }

    @Test("a delivery and a read that outrun the send's ack are reported once the ack stores the message")
    func receiptsBeforeAck() async throws {
        let store = try LocalStore(location: .inMemory)
        let delivered = DeliveredEvent(
            conversation: conversation,
            account: "bob",
            watermark: Watermark(seq: 1, time: 20)
        )
        let read = ReadEvent(
            conversation: conversation,
            account: "bob",
            watermark: Watermark(seq: 1, time: 30),
            readSeqs: []
        )
        let early = try await applied {
            try await store.apply(delivered, me: "alice", then: $0)
            try await store.apply(read, me: "alice", then: $0)
        }
        #expect(early.deliveries.isEmpty && early.reads.isEmpty)

        try await store.enqueue(OutgoingMessage(clientID: "c1", conversation: conversation, body: "b1"), at: Date())
        let acked = try await applied {
            try await store.completeSend("c1", with: message(1, from: "alice"), me: "alice", then: $0)
        }
        #expect(acked.deliveries.map(\.messageIDs) == [["m1"]])
        #expect(acked.reads.map(\.messageIDs) == [["m1"]])
        #expect(try await store.message("m1", me: "alice")?.status == .read)
    }

    @Test("a send's ack does not report again a receipt that already named the message")
    func receiptsAfterResync() async throws {
        let store = try LocalStore(location: .inMemory)
        try await store.enqueue(OutgoingMessage(clientID: "c1", conversation: conversation, body: "b1"), at: Date())
        _ = try await apply(message(1, from: "alice"), to: store)  // a resync stored it before the ack
        let event = DeliveredEvent(conversation: conversation, account: "bob", watermark: Watermark(seq: 1, time: 20))
        let delivered = try await applied { try await store.apply(event, me: "alice", then: $0) }
        #expect(delivered.deliveries.map(\.messageIDs) == [["m1"]])
        let acked = try await applied {
            try await store.completeSend("c1", with: message(1, from: "alice"), me: "alice", then: $0)
        }
        #expect(acked.deliveries.isEmpty)
    }

    @Test("a send's ack hands the message as stored from its commit, after its events, even to a task cancelled once it committed")
    func storedFromTheCommit() async throws {
        let store = try LocalStore(location: .inMemory)
        try await store.enqueue(OutgoingMessage(clientID: "c1", conversation: conversation, body: "b1"), at: Date())
        // The task that completes the send is cancelled from the commit itself, as a cut connection cancels the flush:
        // whatever it would do after `completeSend` returns may not happen.
        let order = Locked<[String]>([])
        let flush = Locked<Task<Void, Never>?>(nil)
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            for await _ in started { break }
            try? await store.completeSend(
                "c1", with: message(1, from: "alice"), me: "alice",
                then: { _ in
                    order.withLock { $0.append("events") }
                    flush.withLock { $0 }?.cancel()
                },
                stored: { stored in order.withLock { $0.append("stored \(stored.id) \(stored.status)") } }
            )
        }
        flush.withLock { $0 = task }
        start.yield()
        await task.value
        #expect(order.withLock { $0 } == ["events", "stored m1 sent"])
        #expect(try await store.pendingMessages(in: nil).isEmpty)
    }

    @Test("a store bound to one account refuses another")
    func oneAccountPerStore() throws {
        let store = try LocalStore(location: .inMemory)
        #expect(try store.boundAccount() == nil)
        try store.bind(to: "alice")
        try store.bind(to: "alice")
        #expect(throws: CourierError.self) { try store.bind(to: "bob") }
        #expect(try store.boundAccount() == "alice")
    }

    @Test("a directory store opens one file per account, once the account is known, and reopens it")
    func directoryStore() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try LocalStore(location: .directory(folder))
        #expect(try store.boundAccount() == nil)
        await #expect(throws: CourierError.noAccount) { try await store.cursors() }
        try store.bind(to: "alice")
        _ = try await apply(message(1), to: store)
        let file = folder.appendingPathComponent("account-alice.sqlite")
        #expect(FileManager.default.fileExists(atPath: file.path))
        let reopened = try LocalStore(location: .file(file))
        #expect(try reopened.boundAccount() == "alice")
        #expect(try await reopened.cursors() == [conversation: 1])
    }

    @Test("a recall notice found in history is reported once, as roaming, and leaves a bodiless recalled message")
    func roamingRecall() async throws {
        let store = try LocalStore(location: .inMemory)
        _ = try await apply(message(1), to: store)
        let notice = WireMessage(
            id: "n2",
            conversation: conversation,
            seq: 2,
            clientID: "recall:m1",
            sender: "bob",
            time: 20,
            body: "",
            recall: WireRecallNotice(messageID: "m1", sender: "bob", recalledBy: "bob", mode: .twoWay)
        )
        let first = try await applied { try await store.apply([notice], arrival: .roaming, me: "alice", then: $0) }
        let again = try await applied { try await store.apply([notice], arrival: .online, me: "alice", then: $0) }
        #expect(first.recalls.map(\.arrival) == [.roaming] && first.recalls.first?.messageID == "m1")
        #expect(first.received.isEmpty && again.recalls.isEmpty)
        let listed = try await store.messages(in: conversation, before: nil, limit: 10, me: "alice")
        #expect(listed.map(\.id) == ["m1"] && listed.map(\.status) == [.recalled] && listed.map(\.body) == [""])
        #expect(try await store.unreadCount(in: conversation) == 0)
    }
}

/// An app updated to a new SDK keeps what its store held: each schema change is a migration of the file in place.
@Suite("Local store upgrades")
struct LocalStoreUpgradeTests {
    let conversation = ConversationID.direct("alice", "bob")

    func message(_ seq: Int64) -> WireMessage {
        WireMessage(
            id: MessageID(rawValue: "m\(seq)"),
            conversation: conversation,
            seq: Seq(seq),
            clientID: ClientMessageID(rawValue: "c\(seq)"),
            sender: "bob",
            time: Timestamp(milliseconds: seq * 10),
            body: "b\(seq)"
        )
    }

    @Test("v9 renames readMark to readAck: a message read one by one before the update stays read after it")
    func readAcksSurviveTheRename() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("courier-upgrade-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("store.sqlite")
        let store = try LocalStore(location: .file(file))
        try await store.apply((1...3).map(message), arrival: .online, me: "alice") { _ in }
        _ = try await store.markRead(.messages(["m2"]), in: conversation, isPrivate: false, token: "t", me: "alice") { _ in }
        #expect(try await store.unreadCount(in: conversation) == 2)

        // The same file as the SDK before v9 left it: the table under its old name, v9 not applied.
        let old = try DatabaseQueue(path: file.path)
        try await old.write { db in
            try db.execute(sql: "ALTER TABLE readAck RENAME TO readMark")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v9'")
        }
        try old.close()
        #expect(try await DatabaseQueue(path: file.path).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM readMark") } == 1)

        // The update opens it: the read of m2 still counts when the unread count is derived again (a new message).
        let updated = try LocalStore(location: .file(file))
        try await updated.apply([message(4)], arrival: .online, me: "alice") { _ in }
        #expect(try await updated.unreadCount(in: conversation) == 3, "m1, m3 and m4; m2 stays read")
    }
    @Test("v12 gives readAck a rowid (live queries see a read ack alone): what was read one by one stays read")
    func readAcksSurviveTheRebuild() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("courier-upgrade-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("store.sqlite")
        let store = try LocalStore(location: .file(file))
        try await store.apply((1...3).map(message), arrival: .online, me: "alice") { _ in }
        _ = try await store.markRead(.messages(["m2"]), in: conversation, isPrivate: false, token: "t", me: "alice") { _ in }

        // The file as v11 left it: readAck without a rowid, none of v12's columns and tables.
        let old = try DatabaseQueue(path: file.path)
        try await old.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE readAckOld (
                        conversationId TEXT NOT NULL REFERENCES conversation(id), account TEXT NOT NULL,
                        seq INTEGER NOT NULL, PRIMARY KEY (conversationId, account, seq)
                    ) WITHOUT ROWID;
                    INSERT INTO readAckOld SELECT conversationId, account, seq FROM readAck;
                    DROP TABLE readAck;
                    ALTER TABLE readAckOld RENAME TO readAck;
                    DROP TABLE localTip;
                    DROP TABLE deletedEntry;
                    ALTER TABLE message DROP COLUMN ext;
                    ALTER TABLE outbox DROP COLUMN ext;
                    ALTER TABLE conversation DROP COLUMN clearedSeq;
                    ALTER TABLE conversation DROP COLUMN muted;
                    ALTER TABLE conversation DROP COLUMN pinnedAt;
                    ALTER TABLE conversation DROP COLUMN draft;
                    DELETE FROM grdb_migrations WHERE identifier = 'v12';
                    """
            )
        }
        try old.close()

        let updated = try LocalStore(location: .file(file))
        try await updated.apply([message(4)], arrival: .online, me: "alice") { _ in }
        #expect(try await updated.unreadCount(in: conversation) == 3, "m1, m3 and m4; m2 stays read")
        let withoutRowid = try await DatabaseQueue(path: file.path).read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'readAck'")
        }
        #expect(withoutRowid?.contains("WITHOUT ROWID") == false)
    }
}
