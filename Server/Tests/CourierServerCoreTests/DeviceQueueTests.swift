import CourierWire
import Synchronization
import Testing

// Courier — Apache-2.0
@testable import CourierServerCore

/// What a device's queue writes: `groupReceipts` events merged while they wait, everything else in the order it was
/// queued (ADR 0021), in one flush per drain, bounded until the network takes the bytes. The frames are decoded from
/// the text the connection would send.
@Suite("Device queue")
struct DeviceQueueTests {
    let team = ConversationID.group("team")
    let coder = FrameCoder()

    /// A connection as the queue sees it: drains run when the test says (a busy event loop), flushes are recorded in
    /// order, and the network takes what was written when the test says (a device that reads, or one that does not).
    final class Connection: FrameSink {
        private struct State {
            var scheduled: [@Sendable () -> Void] = []
            var flushes: [[String]] = []
            var unacknowledged: [@Sendable () -> Void] = []
            var closes: [SessionEndReason] = []
        }
        private let state = Mutex(State())

        func schedule(_ body: @escaping @Sendable () -> Void) { state.withLock { $0.scheduled.append(body) } }

        func write(_ frames: [String], written: @escaping @Sendable () -> Void) {
            state.withLock { state in
                state.flushes.append(frames)
                state.unacknowledged.append(written)
            }
        }

        func close(for reason: SessionEndReason) { state.withLock { $0.closes.append(reason) } }

        /// Runs what was scheduled, as the event loop would, until nothing is.
        func runLoop() {
            while true {
                let bodies = state.withLock { state in
                    defer { state.scheduled = [] }
                    return state.scheduled
                }
                if bodies.isEmpty { return }
                for body in bodies { body() }
            }
        }

        /// The network takes everything written so far.
        func networkTakesAll() {
            let done = state.withLock { state in
                defer { state.unacknowledged = [] }
                return state.unacknowledged
            }
            for written in done { written() }
        }

        var flushes: [[String]] { state.withLock { $0.flushes } }
        var closes: [SessionEndReason] { state.withLock { $0.closes } }
    }

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

    func decode(_ flushes: [[String]]) throws -> [ServerFrame] {
        try flushes.flatMap { try $0.map { try coder.decodeServerFrame($0) } }
    }

    func updates(_ frame: ServerFrame) -> [GroupReceiptUpdate]? {
        guard case .event(.groupReceipts(let event)) = frame else { return nil }
        return event.updates
    }

    @Test("receipts for one group merge while they wait; a frame queued after them, or another group, starts anew")
    func mergeInOrder() throws {
        let connection = Connection()
        let queue = DeviceQueue(capacity: 100, maxBytes: 1 << 20, sink: connection)
        let between = coder.encode(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
        queue.enqueue(receipts(team, "m2", seq: 2, readers: ["r1"], read: 1, unread: 9))
        queue.enqueue(receipts(team, "m1", seq: 1, readers: ["r2"], read: 1, unread: 9, content: "ok"))
        queue.enqueue(receipts(team, "m2", seq: 2, readers: ["r2"], read: 2, unread: 8))
        queue.enqueue(between)
        queue.enqueue(receipts(team, "m2", seq: 2, readers: ["r3"], read: 3, unread: 7))
        queue.enqueue(receipts(.group("other"), "m9", seq: 1, readers: ["r3"], read: 1, unread: 0))
        queue.enqueue(receipts(team, "m2", seq: 2, readers: ["r4"], read: 4, unread: 6))
        #expect(queue.queued.frames == 5)
        connection.runLoop()
        // One drain, one flush.
        #expect(connection.flushes.count == 1)
        #expect(queue.queued.frames == 5, "written frames count until the network takes them")
        connection.networkTakesAll()
        #expect(queue.queued.frames == 0 && queue.queued.bytes == 0)

        let frames = try decode(connection.flushes)
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

    @Test("a merged event stays within 1,000 reader entries, and receipts already written merge no more")
    func boundsOfAMerge() throws {
        let connection = Connection()
        let queue = DeviceQueue(capacity: 10_000, maxBytes: 1 << 24, sink: connection)
        for index in 0..<1_500 {
            queue.enqueue(receipts(team, "m1", seq: 1, readers: ["r\(index)"], read: index + 1, unread: 1_999 - index))
        }
        connection.runLoop()
        // Written: a later read goes in a frame of its own.
        queue.enqueue(receipts(team, "m1", seq: 1, readers: ["late"], read: 1_501, unread: 499))
        connection.runLoop()
        #expect(connection.flushes.map(\.count) == [2, 1])

        let frames = try decode(connection.flushes)
        #expect(frames.map { updates($0)?.first?.readers.count } == [1_000, 500, 1])
        #expect(frames.compactMap { updates($0)?.first?.readCount } == [1_000, 1_500, 1_501])
        let named = frames.flatMap { updates($0)?.first?.readers.keys.map(\.rawValue) ?? [] }
        #expect(Set(named).count == 1_501 && named.count == 1_501)
    }

    @Test("what the network has not taken counts against the bound: a device that does not read is cut off, once")
    func byteBound() {
        let connection = Connection()
        let cutOff = Atomic(0)
        let queue = DeviceQueue(capacity: 100, maxBytes: 20_000, sink: connection) {
            cutOff.add(1, ordering: .relaxed)
        }
        let frame = coder.encode(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
        // Written to the connection, never taken by the network.
        for _ in 0..<50 {
            queue.enqueue(frame)
            connection.runLoop()
        }
        #expect(!queue.hasOverflowed && queue.queued.frames == 50)
        // Merged receipts count too.
        for index in 0..<200 {
            queue.enqueue(receipts(team, "m1", seq: 1, readers: ["reader-\(index)"], read: index + 1, unread: 0))
        }
        #expect(queue.hasOverflowed)
        #expect(cutOff.load(ordering: .relaxed) == 1)
        #expect(queue.queued.bytes <= 20_000)
        // Nothing more is queued for a device that was cut off.
        queue.enqueue(frame)
        #expect(cutOff.load(ordering: .relaxed) == 1)
    }

    @Test("finishing for a reason: what was queued goes out, then the close frame; nothing queued after it does")
    func closeAfterTheRest() throws {
        let connection = Connection()
        let queue = DeviceQueue(capacity: 100, maxBytes: 1 << 20, sink: connection)
        let error = coder.encode(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
        queue.enqueue(error)
        queue.finish(closing: .tokenExpired)
        queue.enqueue(error)
        #expect(connection.closes.isEmpty)
        connection.runLoop()
        #expect(connection.flushes == [[error]])
        #expect(connection.closes == [.tokenExpired])
        // Finishing again, or without a reason, sends no second close.
        queue.finish(closing: .shuttingDown)
        connection.runLoop()
        #expect(connection.closes == [.tokenExpired])
    }
}
