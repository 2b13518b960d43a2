// Courier — Apache-2.0
public import CourierWire
internal import Synchronization

/// Identifies one WebSocket connection on this node.
public struct ConnectionID: Hashable, Sendable {
    let rawValue: Int
}

/// The devices connected to this node, by account. Fan-out to online devices happens here, in memory.
public final class ConnectionRegistry: Sendable {
    private let state = Mutex<[AccountID: [ConnectionID: DeviceOutbox]]>([:])
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

    /// The number of connected devices.
    public var connectionCount: Int { state.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

/// The bounded queue of frames waiting to be written to one device. When it overflows the device is disconnected
/// (close code 1008, reason `courier.slowConsumer`); it reconnects and syncs, so nothing is lost.
final class DeviceOutbox: Sendable {
    let frames: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let overflowed = Atomic<Bool>(false)

    init(capacity: Int) {
        (frames, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingOldest(capacity))
    }

    func enqueue(_ frame: String) {
        if case .dropped = continuation.yield(frame) {
            overflowed.store(true, ordering: .relaxed)
            continuation.finish()
        }
    }

    var hasOverflowed: Bool { overflowed.load(ordering: .relaxed) }

    func finish() { continuation.finish() }
}
