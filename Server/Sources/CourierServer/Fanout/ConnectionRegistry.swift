// Courier — Apache-2.0
internal import CourierStorage
public import CourierWire
internal import Synchronization

/// Identifies one WebSocket connection on this node.
public struct ConnectionID: Hashable, Sendable {
    let rawValue: Int
    /// No connection: what the app's backend acts through (registered connections count from 1).
    static let none = ConnectionID(rawValue: 0)
}

/// The devices connected to this node, by account. Fan-out to online devices happens here, in memory.
public final class ConnectionRegistry: Sendable {
    private let state = Locked<[AccountID: [ConnectionID: DeviceOutbox]]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    func add(_ outbox: DeviceOutbox, for account: AccountID) -> ConnectionID {
        let id = ConnectionID(rawValue: nextID.wrappingAdd(1, ordering: .relaxed).newValue)
        state.withLock { $0[account, default: [:]][id] = outbox }
        return id
    }

    func remove(_ id: ConnectionID, for account: AccountID) {
        state.withLock { devices in
            devices[account]?[id] = nil
            if devices[account]?.isEmpty == true { devices[account] = nil }
        }
    }

    /// Queues `frame` for every connected device of `accounts`, except the connection `excluded`.
    func send(_ frame: String, to accounts: [AccountID], except excluded: ConnectionID?) {
        // Snapshot under the lock, yield outside it.
        let outboxes = state.withLock { devices in
            accounts.flatMap { account in
                (devices[account] ?? [:]).compactMap { id, outbox in id == excluded ? nil : outbox }
            }
        }
        for outbox in outboxes { outbox.enqueue(frame) }
    }

    /// Queues `frame` for every connected device.
    func sendToAll(_ frame: ServerFrame) {
        let text = FrameCoder().encode(frame)
        let outboxes = state.withLock { devices in devices.values.flatMap { $0.values } }
        for outbox in outboxes { outbox.enqueue(text) }
    }

    /// Whether any of `accounts` has a device connected to this node.
    func hasDevices(of accounts: [AccountID]) -> Bool {
        state.withLock { devices in accounts.contains { devices[$0] != nil } }
    }

    /// Whether any device is connected to this node.
    var hasDevices: Bool { state.withLock { !$0.isEmpty } }

    /// The number of `account`'s devices connected to this node.
    func connectionCount(of account: AccountID) -> Int { state.withLock { $0[account]?.count ?? 0 } }

    /// The number of connected devices.
    public var connectionCount: Int { state.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// What waits in the devices' outbound queues now.
    var outboundQueues: OutboundQueues {
        let outboxes = state.withLock { devices in devices.values.flatMap { $0.values } }
        var queues = OutboundQueues()
        for outbox in outboxes {
            let (frames, bytes) = outbox.queued
            queues.frames += frames
            queues.bytes += bytes
            queues.maxFrames = max(queues.maxFrames, frames)
        }
        return queues
    }
}

/// The frames and bytes waiting to be written to this node's devices, summed, and the frames of the deepest queue.
struct OutboundQueues: Sendable {
    var frames = 0
    var bytes = 0
    var maxFrames = 0
}

/// The bounded queue of frames waiting to be written to one device, bounded in frames and in bytes. When either
/// bound is passed the device is cut off (close code 1008, reason `courier.slowConsumer`, when the close frame can still
/// be written); it reconnects and syncs, so nothing is lost. A frame larger than the byte bound is still queued when
/// nothing else is, so that every answer can be sent.
final class DeviceOutbox: Sendable {
    private struct State {
        var queuedFrames = 0
        var queuedBytes = 0
        var overflowed = false
        var overflowReported = false
        var closing: SessionEndReason?
    }

    let frames: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let state = Locked(State())
    private let maxBytes: Int
    private let onOverflow: @Sendable () -> Void

    init(capacity: Int, maxBytes: Int, onOverflow: @escaping @Sendable () -> Void = {}) {
        (frames, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingOldest(capacity))
        self.maxBytes = maxBytes
        self.onOverflow = onOverflow
    }

    func enqueue(_ frame: String) {
        let size = frame.utf8.count
        let accepted = state.withLock { state -> Bool in
            guard !state.overflowed else { return false }
            guard state.queuedBytes == 0 || state.queuedBytes + size <= maxBytes else {
                state.overflowed = true
                return false
            }
            state.queuedFrames += 1
            state.queuedBytes += size
            return true
        }
        guard accepted else { return overflow() }
        switch continuation.yield(frame) {
        case .enqueued: break
        case .dropped:
            unqueue(size)
            overflow()
        case .terminated: unqueue(size)  // the connection is closing: nothing more goes out
        @unknown default: break
        }
    }

    /// A frame left the queue (written to the connection).
    func sent(_ frame: String) { unqueue(frame.utf8.count) }

    /// A frame of `size` bytes is no longer queued: written, or never taken by the stream.
    private func unqueue(_ size: Int) {
        state.withLock { state in
            state.queuedFrames -= 1
            state.queuedBytes -= size
        }
    }

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
}
