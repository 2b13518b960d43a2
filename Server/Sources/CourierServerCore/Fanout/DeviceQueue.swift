// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// Where a device's frames are written: its connection (``ChannelFrameSink``), or a test's recorder.
package protocol FrameSink: Sendable {
    /// Runs `body` where the device's writes are made (the connection's event loop), after what was scheduled before.
    func schedule(_ body: @escaping @Sendable () -> Void)
    /// Writes `frames` in order and flushes them (called from a scheduled body); `written` runs once the network took
    /// them all, or failed to.
    func write(_ frames: [String], written: @escaping @Sendable () -> Void)
    /// Sends the close frame for `reason`, after everything written.
    func close(for reason: SessionEndReason)
}

/// The bounded queue of frames waiting to be written to one device, bounded in frames and in bytes (a frame counts
/// until the network has taken it). When either bound is passed the device is cut off (close code 1008, reason
/// `courier.slowConsumer`, when the close frame can still be written); it reconnects and syncs, so nothing is lost. A
/// frame larger than the byte bound is still queued when nothing else is, so that every answer can be sent.
///
/// No task waits on the queue: whoever queues the first frame of a burst schedules one drain on the connection's
/// event loop, which writes every frame queued by then with one flush.
///
/// `groupReceipts` events wait merged (ADR 0021): an event for the group whose receipts are the last thing queued is
/// merged into them, up to ``Change/maxReadersPerEvent`` reader entries, instead of being queued after them. The
/// sender of a message that thousands of members read at once gets a few events naming them all, not one per reader,
/// and nothing changes order: only the newest item of the queue takes more, and it is encoded when it is written.
package final class DeviceQueue: Sendable {
    private enum Item {
        /// A frame, encoded once for all its recipients.
        case frame(String)
        /// `groupReceipts` updates for one group, merged while they wait; `bytes` is what the queue counts for them
        /// (an estimate of the frame's size).
        case receipts(ConversationID, GroupReceiptMerge, bytes: Int)
    }

    private struct State {
        var pending: [Item] = []
        var queuedFrames = 0
        var queuedBytes = 0
        var overflowed = false
        var overflowReported = false
        /// A drain is scheduled and has not yet taken the pending items.
        var draining = false
        var finished = false
        var closing: SessionEndReason?
        var closeSent = false

        /// Counts in a new frame of `size` bytes if the bounds allow it.
        mutating func admit(_ size: Int, capacity: Int, maxBytes: Int) -> Bool {
            guard !overflowed else { return false }
            guard queuedFrames < capacity, queuedBytes == 0 || queuedBytes + size <= maxBytes else {
                overflowed = true
                return false
            }
            queuedFrames += 1
            queuedBytes += size
            return true
        }

        /// Merges `event` into the receipts queued last if they are for its group and can take `entries` more reader
        /// entries and the byte bound allows `size` more; `nil` when they cannot, `false` when the bound is passed.
        mutating func merge(_ event: GroupReceiptsEvent, entries: Int, size: Int, maxBytes: Int) -> Bool? {
            guard tailTakes(entries, for: event.conversation) else { return nil }
            guard !overflowed, queuedBytes + size <= maxBytes else {
                overflowed = true
                return false
            }
            // Taken out and put back: merged in place, since a copy per event would make a long run quadratic.
            guard case .receipts(let conversation, var taken, let bytes) = pending.removeLast() else {
                preconditionFailure("tailTakes checked that the last item is receipts")
            }
            taken.add(event)
            pending.append(.receipts(conversation, taken, bytes: bytes + size))
            queuedBytes += size
            return true
        }

        /// Whether the receipts queued last are for `conversation` and can take `entries` more reader entries. (No copy
        /// of them outlives the check: the merge that follows must find its buffers uniquely referenced.)
        func tailTakes(_ entries: Int, for conversation: ConversationID) -> Bool {
            guard case .receipts(let group, let merge, _) = pending.last else { return false }
            return group == conversation && merge.readerEntries + entries <= Change.maxReadersPerEvent
        }

        /// Whether the caller must schedule a drain.
        mutating func needsDrain() -> Bool {
            defer { draining = true }
            return !draining
        }
    }

    private let state = Locked(State())
    private let sink: any FrameSink
    private let coder: FrameCoder
    private let capacity: Int
    private let maxBytes: Int
    private let onOverflow: @Sendable () -> Void

    package init(
        capacity: Int,
        maxBytes: Int,
        sink: any FrameSink,
        coder: FrameCoder = FrameCoder(),
        onOverflow: @escaping @Sendable () -> Void = {}
    ) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.sink = sink
        self.coder = coder
        self.onOverflow = onOverflow
    }

    package func enqueue(_ frame: String) {
        let size = frame.utf8.count
        let outcome = state.withLock { state -> (accepted: Bool, drain: Bool) in
            guard !state.finished else { return (true, false) }  // the connection is closing: nothing more goes out
            guard state.admit(size, capacity: capacity, maxBytes: maxBytes) else { return (false, false) }
            state.pending.append(.frame(frame))
            return (true, state.needsDrain())
        }
        settle(outcome)
    }

    /// Queues a `groupReceipts` event, merged into the receipts queued last when they are for the same group, are still
    /// waiting, and stay within ``Change/maxReadersPerEvent`` reader entries.
    func enqueue(_ event: GroupReceiptsEvent) {
        let size = Self.estimatedBytes(of: event)
        let entries = GroupReceiptMerge.readerEntries(of: event)
        let outcome = state.withLock { state -> (accepted: Bool, drain: Bool) in
            guard !state.finished else { return (true, false) }
            if let merged = state.merge(event, entries: entries, size: size, maxBytes: maxBytes) {
                return (merged, false)  // the drain that will take them is scheduled already
            }
            guard state.admit(size, capacity: capacity, maxBytes: maxBytes) else { return (false, false) }
            state.pending.append(.receipts(event.conversation, GroupReceiptMerge(event), bytes: size))
            return (true, state.needsDrain())
        }
        settle(outcome)
    }

    private func settle(_ outcome: (accepted: Bool, drain: Bool)) {
        if !outcome.accepted { return overflow() }
        if outcome.drain { scheduleDrain() }
    }

    private func scheduleDrain() { sink.schedule { [self] in drain() } }

    /// Writes everything pending, in order, with one flush; then the close frame if the queue was finished for a
    /// reason.
    private func drain() {
        let (items, close) = state.withLock { state -> ([Item], SessionEndReason?) in
            state.draining = false
            let items = state.pending
            state.pending = []
            guard state.finished, !state.closeSent, let reason = state.closing else { return (items, nil) }
            state.closeSent = true
            return (items, reason)
        }
        if !items.isEmpty {
            var frames: [String] = []
            frames.reserveCapacity(items.count)
            var bytes = 0
            for item in items {
                switch item {
                case .frame(let frame):
                    frames.append(frame)
                    bytes += frame.utf8.count
                case .receipts(let conversation, let merge, let counted):
                    let event = GroupReceiptsEvent(conversation: conversation, updates: merge.sorted.map(\.update))
                    frames.append(coder.encode(ServerFrame.event(.groupReceipts(event))))
                    bytes += counted
                }
            }
            let (count, size) = (frames.count, bytes)
            sink.write(frames) { [self] in
                state.withLock { state in
                    state.queuedFrames -= count
                    state.queuedBytes -= size
                }
            }
        }
        if let close { sink.close(for: close) }
    }

    /// Frames and bytes waiting to be written.
    var queued: (frames: Int, bytes: Int) { state.withLock { ($0.queuedFrames, $0.queuedBytes) } }

    var hasOverflowed: Bool { state.withLock { $0.overflowed } }

    /// Ends the queue: frames already queued are still written, then the close frame for `reason` if given.
    package func finish(closing reason: SessionEndReason? = nil) {
        let drain = state.withLock { state -> Bool in
            if state.closing == nil { state.closing = reason }
            state.finished = true
            return reason != nil && state.needsDrain()
        }
        if drain { scheduleDrain() }
    }

    private func overflow() {
        let first = state.withLock { state -> Bool in
            defer {
                state.overflowed = true
                state.overflowReported = true
                state.finished = true  // nothing more is queued; the device is cut off
            }
            return !state.overflowReported
        }
        if first { onOverflow() }
    }

    /// About the UTF-8 size of `event`'s frame, counted against the byte bound without encoding it (it is encoded once,
    /// merged, when written).
    static func estimatedBytes(of event: GroupReceiptsEvent) -> Int {
        event.updates.reduce(64 + event.conversation.rawValue.utf8.count) { total, update in
            let readers = update.readers.keys.reduce(0) { $0 + $1.rawValue.utf8.count + 20 }
            let contents = (update.contents ?? [:]).reduce(0) {
                $0 + $1.key.rawValue.utf8.count + $1.value.utf8.count + 8
            }
            return total + 96 + update.messageID.rawValue.utf8.count + readers + contents
        }
    }
}
