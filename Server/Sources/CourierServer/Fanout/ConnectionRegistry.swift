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
    private let state = Locked<[AccountID: [ConnectionID: DeviceQueue]]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    func add(_ queue: DeviceQueue, for account: AccountID) -> ConnectionID {
        let id = ConnectionID(rawValue: nextID.wrappingAdd(1, ordering: .relaxed).newValue)
        state.withLock { $0[account, default: [:]][id] = queue }
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
        for queue in queues(of: accounts, except: excluded) { queue.enqueue(frame) }
    }

    /// The queues of `accounts`' connected devices, except the connection `excluded`, snapshot under the lock
    /// (frames are queued outside it).
    func queues(of accounts: [AccountID], except excluded: ConnectionID?) -> [DeviceQueue] {
        state.withLock { devices in
            accounts.flatMap { account in
                (devices[account] ?? [:]).compactMap { id, queue in id == excluded ? nil : queue }
            }
        }
    }

    /// Queues `frame` for every connected device.
    func sendToAll(_ frame: ServerFrame) {
        let text = FrameCoder().encode(frame)
        let queues = state.withLock { devices in devices.values.flatMap { $0.values } }
        for queue in queues { queue.enqueue(text) }
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
        let queues = state.withLock { devices in devices.values.flatMap { $0.values } }
        var total = OutboundQueues()
        for queue in queues {
            let (frames, bytes) = queue.queued
            total.frames += frames
            total.bytes += bytes
            total.maxFrames = max(total.maxFrames, frames)
        }
        return total
    }
}

/// The frames and bytes waiting to be written to this node's devices, summed, and the frames of the deepest queue.
struct OutboundQueues: Sendable {
    var frames = 0
    var bytes = 0
    var maxFrames = 0
}
