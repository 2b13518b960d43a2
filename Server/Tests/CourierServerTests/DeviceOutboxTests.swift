import CourierWire
import Synchronization
import Testing

// Courier — Apache-2.0
@testable import CourierServer

/// What a device's writer takes from its queue: `groupReceipts` events merged while they wait, everything else in the
/// order it was queued (ADR 0021). The frames are decoded from the bytes the writer would send.
@Suite("Device outbox")
struct DeviceOutboxTests {
    let team = ConversationID.group("team")
    let coder = FrameCoder()

    func receipts(
        _ group: ConversationID,
        _ message: String,
        seq: Int64,
        readers: [String],
        read: Int,
        unread: Int,
        content: String? = nil
    ) -> GroupReceiptsEvent {
        let accounts = readers.map { AccountID(rawValue: $0) }
        let update = GroupReceiptUpdate(
            messageID: MessageID(rawValue: message),
            seq: Seq(seq),
            readers: Dictionary(uniqueKeysWithValues: accounts.map { ($0, Timestamp(rawValue: seq)) }),
            contents: content.map { text in Dictionary(uniqueKeysWithValues: accounts.map { ($0, text) }) },
            readCount: read,
            unreadCount: unread
        )
        return GroupReceiptsEvent(conversation: group, updates: [update])
    }

    /// Everything queued, as the writer would write it, until the queue ends.
    func drain(_ outbox: DeviceOutbox) async throws -> [ServerFrame] {
        var frames: [ServerFrame] = []
        for await item in outbox.items {
            let (text, bytes) = try #require(outbox.take(item, coder: coder))
            outbox.sent(bytes)
            frames.append(try coder.decodeServerFrame(text))
        }
        return frames
    }

    func updates(_ frame: ServerFrame) -> [GroupReceiptUpdate]? {
        guard case .event(.groupReceipts(let event)) = frame else { return nil }
        return event.updates
    }

    @Test("receipts for one group merge while they wait; a frame queued after them, or another group, starts anew")
    func mergeInOrder() async throws {
        let outbox = DeviceOutbox(capacity: 100, maxBytes: 1 << 20)
        let ack = coder.encode(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
        outbox.enqueue(receipts(team, "m2", seq: 2, readers: ["r1"], read: 1, unread: 9))
        outbox.enqueue(receipts(team, "m1", seq: 1, readers: ["r2"], read: 1, unread: 9, content: "ok"))
        outbox.enqueue(receipts(team, "m2", seq: 2, readers: ["r2"], read: 2, unread: 8))
        outbox.enqueue(ack)
        outbox.enqueue(receipts(team, "m2", seq: 2, readers: ["r3"], read: 3, unread: 7))
        outbox.enqueue(receipts(.group("other"), "m9", seq: 1, readers: ["r3"], read: 1, unread: 0))
        outbox.enqueue(receipts(team, "m2", seq: 2, readers: ["r4"], read: 4, unread: 6))
        #expect(outbox.queued.frames == 5)
        outbox.finish()
        let frames = try await drain(outbox)
        #expect(outbox.queued.frames == 0 && outbox.queued.bytes == 0)

        try #require(frames.count == 5)
        // The first three merged, in seq order, each reader named once, with the latest counts.
        let merged = try #require(updates(frames[0]))
        #expect(merged.map(\.messageID) == ["m1", "m2"])
        #expect(merged[0].readers == ["r2": 1] && merged[0].contents == ["r2": "ok"])
        #expect(merged[1].readers == ["r1": 2, "r2": 2] && merged[1].contents == nil)
        #expect(merged[1].readCount == 2 && merged[1].unreadCount == 8)
        // The frame in between keeps its place, and so does everything after it.
        guard case .event(.syncRequired) = frames[1] else { Issue.record("expected the frame in between"); return }
        #expect(try #require(updates(frames[2])).map(\.readers) == [["r3": 2]])
        #expect(try #require(updates(frames[3])).map(\.messageID) == ["m9"])
        #expect(try #require(updates(frames[4])).map(\.readCount) == [4])
    }

    @Test("a merged event stays within 1,000 reader entries, and receipts the writer took merge no more")
    func boundsOfAMerge() async throws {
        let outbox = DeviceOutbox(capacity: 10_000, maxBytes: 1 << 24)
        for index in 0..<1_500 {
            outbox.enqueue(receipts(team, "m1", seq: 1, readers: ["r\(index)"], read: index + 1, unread: 1_999 - index))
        }
        var iterator = outbox.items.makeAsyncIterator()
        var frames: [ServerFrame] = []
        for _ in 0..<2 {
            let item = try #require(await iterator.next())
            let (text, bytes) = try #require(outbox.take(item, coder: coder))
            outbox.sent(bytes)
            frames.append(try coder.decodeServerFrame(text))
        }
        // Taken: a later read is queued after them.
        outbox.enqueue(receipts(team, "m1", seq: 1, readers: ["late"], read: 1_501, unread: 499))
        outbox.finish()
        frames += try await drain(outbox)

        let readers = frames.map { updates($0)?.first?.readers.count }
        #expect(readers == [1_000, 500, 1])
        #expect(frames.compactMap { updates($0)?.first?.readCount } == [1_000, 1_500, 1_501])
        let named = frames.flatMap { updates($0)?.first?.readers.keys.map(\.rawValue) ?? [] }
        #expect(Set(named).count == 1_501 && named.count == 1_501)
    }

    @Test("merged receipts count against the queue's byte bound: a device that does not read is still cut off")
    func byteBound() {
        let cutOff = Atomic(0)
        let outbox = DeviceOutbox(capacity: 100, maxBytes: 20_000) { cutOff.add(1, ordering: .relaxed) }
        for index in 0..<200 {
            outbox.enqueue(receipts(team, "m1", seq: 1, readers: ["reader-\(index)"], read: index + 1, unread: 0))
        }
        #expect(outbox.hasOverflowed)
        #expect(cutOff.load(ordering: .relaxed) == 1)
        #expect(outbox.queued.frames == 1 && outbox.queued.bytes <= 20_000)
    }
}
