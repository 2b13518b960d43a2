// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire

/// The bounded queue of frames waiting to be written to one device, bounded in frames and in bytes. When either
/// bound is passed the device is cut off (close code 1008, reason `courier.slowConsumer`, when the close frame can still
/// be written); it reconnects and syncs, so nothing is lost. A frame larger than the byte bound is still queued when
/// nothing else is, so that every answer can be sent.
///
/// `groupReceipts` events wait merged (ADR 0021): an event for the group whose receipts are the last thing queued is
/// merged into them, up to ``ReadService/maxReadersPerEvent`` reader entries, instead of being queued after them. The
/// sender of a message that thousands of members read at once gets a few events naming them all, not one per reader,
/// and nothing changes order: only the newest item of the queue takes more, and it is encoded when the writer takes it.
final class DeviceOutbox: Sendable {
    /// What the writer takes from the queue (``take(_:coder:)`` turns it into a frame).
    enum Item: Sendable {
        /// A frame, encoded once for all its recipients.
        case frame(String)
        /// The `groupReceipts` updates queued under this number, merged while they wait.
        case receipts(Int)
    }

    private struct PendingReceipts {
        let conversation: ConversationID
        var merge: GroupReceiptMerge
        /// What the queue counts for them (an estimate of the frame's size).
        var bytes: Int
    }

    private struct State {
        var queuedFrames = 0
        var queuedBytes = 0
        var overflowed = false
        var overflowReported = false
        var closing: SessionEndReason?
        var receipts: [Int: PendingReceipts] = [:]
        /// The receipts queued last, while nothing has been queued after them.
        var tail: Int?
        var nextReceipts = 0

        /// Counts in a new frame of `size` bytes if the bounds allow it.
        mutating func admit(_ size: Int, maxBytes: Int) -> Bool {
            guard !overflowed else { return false }
            guard queuedBytes == 0 || queuedBytes + size <= maxBytes else {
                overflowed = true
                return false
            }
            queuedFrames += 1
            queuedBytes += size
            return true
        }

        /// Counts `size` more bytes into a frame already queued if the bounds allow it.
        mutating func grow(by size: Int, maxBytes: Int) -> Bool {
            guard !overflowed else { return false }
            guard queuedBytes + size <= maxBytes else {
                overflowed = true
                return false
            }
            queuedBytes += size
            return true
        }

        /// Whether the receipts queued as `id` can take `entries` more reader entries for `conversation`. (No copy of
        /// them outlives the check: the merge that follows must find its buffers uniquely referenced.)
        func canMerge(_ entries: Int, for conversation: ConversationID, into id: Int) -> Bool {
            guard let pending = receipts[id] else { return false }
            return pending.conversation == conversation
                && pending.merge.readerEntries + entries <= ReadService.maxReadersPerEvent
        }

        mutating func unqueue(_ size: Int) {
            queuedFrames -= 1
            queuedBytes -= size
        }

        /// Hands `item` (counted in as `size` bytes) to the writer; `false` when the stream's frame bound dropped it.
        /// Called under the lock, so that the stream's order is the order in which ``tail`` changes.
        mutating func yield(_ item: Item, size: Int, to continuation: AsyncStream<Item>.Continuation) -> Bool {
            switch continuation.yield(item) {
            case .enqueued: return true
            case .dropped:
                forget(item, size: size)
                return false
            case .terminated:
                forget(item, size: size)  // the connection is closing: nothing more goes out
                return true
            @unknown default: return true
            }
        }

        private mutating func forget(_ item: Item, size: Int) {
            unqueue(size)
            if case .receipts(let id) = item {
                receipts[id] = nil
                if tail == id { tail = nil }
            }
        }
    }

    let items: AsyncStream<Item>
    private let continuation: AsyncStream<Item>.Continuation
    private let state = Locked(State())
    private let maxBytes: Int
    private let onOverflow: @Sendable () -> Void

    init(capacity: Int, maxBytes: Int, onOverflow: @escaping @Sendable () -> Void = {}) {
        (items, continuation) = AsyncStream.makeStream(of: Item.self, bufferingPolicy: .bufferingOldest(capacity))
        self.maxBytes = maxBytes
        self.onOverflow = onOverflow
    }

    func enqueue(_ frame: String) {
        let size = frame.utf8.count
        let accepted = state.withLock { state in
            guard state.admit(size, maxBytes: maxBytes) else { return false }
            state.tail = nil
            return state.yield(.frame(frame), size: size, to: continuation)
        }
        if !accepted { overflow() }
    }

    /// Queues a `groupReceipts` event, merged into the receipts queued last when they are for the same group, are still
    /// waiting, and stay within ``ReadService/maxReadersPerEvent`` reader entries.
    func enqueue(_ event: GroupReceiptsEvent) {
        let size = Self.estimatedBytes(of: event)
        let entries = GroupReceiptMerge.readerEntries(of: event)
        let accepted = state.withLock { state in
            if let tail = state.tail, state.canMerge(entries, for: event.conversation, into: tail) {
                guard state.grow(by: size, maxBytes: maxBytes) else { return false }
                // In place: a copy of the merge per event would make a long run of receipts quadratic.
                state.receipts[tail]?.merge.add(event)
                state.receipts[tail]?.bytes += size
                return true
            }
            guard state.admit(size, maxBytes: maxBytes) else { return false }
            let id = state.nextReceipts
            state.nextReceipts += 1
            state.receipts[id] = PendingReceipts(
                conversation: event.conversation,
                merge: GroupReceiptMerge(event),
                bytes: size
            )
            state.tail = id
            return state.yield(.receipts(id), size: size, to: continuation)
        }
        if !accepted { overflow() }
    }

    /// The frame to write for `item`, and the bytes the queue counted for it (give them to ``sent(_:)`` once written).
    /// Receipts taken here merge no more.
    func take(_ item: Item, coder: FrameCoder) -> (frame: String, bytes: Int)? {
        switch item {
        case .frame(let frame):
            return (frame, frame.utf8.count)
        case .receipts(let id):
            let pending = state.withLock { state in
                if state.tail == id { state.tail = nil }
                return state.receipts.removeValue(forKey: id)
            }
            guard let pending else { return nil }
            let event = GroupReceiptsEvent(conversation: pending.conversation, updates: pending.merge.sorted.map(\.update))
            return (coder.encode(ServerFrame.event(.groupReceipts(event))), pending.bytes)
        }
    }

    /// A frame the queue counted as `bytes` left it (written to the connection).
    func sent(_ bytes: Int) { state.withLock { $0.unqueue(bytes) } }

    /// Frames and bytes waiting to be written.
    var queued: (frames: Int, bytes: Int) { state.withLock { ($0.queuedFrames, $0.queuedBytes) } }

    var hasOverflowed: Bool { state.withLock { $0.overflowed } }

    /// Bytes waiting to be written.
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// Why the writer closes the connection once the queue is drained, if the server decided so.
    var closing: SessionEndReason? { state.withLock { $0.closing } }

    /// Ends the queue: frames already queued are still written, then the connection closes for `reason` if given.
    func finish(closing reason: SessionEndReason? = nil) {
        state.withLock { state in
            if state.closing == nil { state.closing = reason }
        }
        continuation.finish()
    }

    private func overflow() {
        let first = state.withLock { state -> Bool in
            defer {
                state.overflowed = true
                state.overflowReported = true
            }
            return !state.overflowReported
        }
        continuation.finish()
        if first { onOverflow() }
    }

    /// About the UTF-8 size of `event`'s frame, counted against the byte bound without encoding it (it is encoded once,
    /// merged, when written).
    static func estimatedBytes(of event: GroupReceiptsEvent) -> Int {
        event.updates.reduce(64 + event.conversation.rawValue.utf8.count) { total, update in
            let readers = update.readers.keys.reduce(0) { $0 + $1.rawValue.utf8.count + 20 }
            let contents = (update.contents ?? [:]).reduce(0) { $0 + $1.key.rawValue.utf8.count + $1.value.utf8.count + 8 }
            return total + 96 + update.messageID.rawValue.utf8.count + readers + contents
        }
    }
}
