// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import Foundation
package import CourierWire
internal import Synchronization

/// Identifies one WebSocket connection on this node.
public struct ConnectionID: Hashable, Sendable {
    package let rawValue: Int
    /// No connection: what the app's backend acts through (registered connections count from 1).
    static let none = ConnectionID(rawValue: 0)
}

/// The devices connected to this node, by account. Fan-out to online devices happens here, in memory.
public final class ConnectionRegistry: Sendable {
    /// One authenticated connection: its outbound queue, its session's end, and when its token was issued.
    struct Device: Sendable {
        let queue: DeviceQueue
        let control: SessionControl
        let tokenIssuedAt: Date?
        let device: DeviceID
        let connectedAt: Timestamp
    }

    private let state = Locked<[AccountID: [ConnectionID: Device]]>([:])
    private let nextID = Atomic<Int>(0)
    /// Where nodes share the store: the record of every node's connections, told when one of these ends.
    package let presence: DevicePresence?

    public convenience init() { self.init(presence: nil) }

    package init(presence: DevicePresence?) {
        self.presence = presence
    }

    package func add(
        _ queue: DeviceQueue,
        control: SessionControl,
        tokenIssuedAt: Date?,
        device deviceID: DeviceID,
        at time: Timestamp,
        for account: AccountID
    ) -> ConnectionID {
        let id = ConnectionID(rawValue: nextID.wrappingAdd(1, ordering: .relaxed).newValue)
        let device = Device(
            queue: queue,
            control: control,
            tokenIssuedAt: tokenIssuedAt,
            device: deviceID,
            connectedAt: time
        )
        state.withLock { $0[account, default: [:]][id] = device }
        return id
    }

    package func remove(_ id: ConnectionID, for account: AccountID) {
        state.withLock { devices in
            devices[account]?[id] = nil
            if devices[account]?.isEmpty == true { devices[account] = nil }
        }
        presence?.ended([id])
    }

    /// Whether connection `id` of `account` is still registered (not ended since).
    package func contains(_ id: ConnectionID, for account: AccountID) -> Bool {
        state.withLock { $0[account]?[id] != nil }
    }

    /// Ends the sessions of `account`'s devices for `reason`: all of them, or those whose token was issued before
    /// `issuedBefore` (a token without `iat` counts as issued before any time). Answers how many.
    /// Only the sessions of `device` when given.
    @discardableResult
    package func end(
        _ account: AccountID,
        for reason: SessionEndReason,
        issuedBefore: Date? = nil,
        device deviceID: DeviceID? = nil
    ) -> Int {
        // Ended sessions leave the registry at once: no event is queued for them any more, and the device lists say
        // so as soon as the request that ended them is answered (their connection's own clean-up comes later).
        let ending = state.withLock { devices -> [ConnectionID: Device] in
            let ending = (devices[account] ?? [:]).filter { _, device in
                if let deviceID, device.device != deviceID { return false }
                guard let issuedBefore else { return true }
                return device.tokenIssuedAt.map { $0 < issuedBefore } ?? true
            }
            for id in ending.keys { devices[account]?[id] = nil }
            if devices[account]?.isEmpty == true { devices[account] = nil }
            return ending
        }
        presence?.ended(Array(ending.keys))
        for device in ending.values { device.control.end(reason) }
        return ending.count
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
                (devices[account] ?? [:]).compactMap { id, device in id == excluded ? nil : device.queue }
            }
        }
    }

    /// The queues of the devices of `members` and of `others` (accounts besides them), except `excluded`: by the
    /// smaller of the two lists, the connected accounts asked against the set or the members looked up.
    func queues(of members: Set<AccountID>, and others: [AccountID], except excluded: ConnectionID?) -> [DeviceQueue] {
        state.withLock { devices in
            func queues(_ account: AccountID) -> [DeviceQueue] {
                (devices[account] ?? [:]).compactMap { id, device in id == excluded ? nil : device.queue }
            }
            let named = others.filter { !members.contains($0) }.flatMap(queues)
            guard devices.count < members.count else { return members.flatMap(queues) + named }
            return devices.keys.filter(members.contains).flatMap(queues) + named
        }
    }

    /// Queues `frame` for every connected device.
    func sendToAll(_ frame: ServerFrame) {
        let text = FrameCoder().encode(frame)
        for queue in allQueues { queue.enqueue(text) }
    }

    private var allQueues: [DeviceQueue] { state.withLock { devices in devices.values.flatMap { $0.values.map(\.queue) } } }

    /// Whether any of `accounts` has a device connected to this node.
    func hasDevices(of accounts: [AccountID]) -> Bool {
        state.withLock { devices in accounts.contains { devices[$0] != nil } }
    }

    /// The accounts with a device connected to this node.
    var accounts: [AccountID] { state.withLock { Array($0.keys) } }

    /// Whether any device is connected to this node.
    var hasDevices: Bool { state.withLock { !$0.isEmpty } }

    /// `account`'s devices connected to this node (named `local`: the only one), by device id.
    package func devices(of account: AccountID) -> [ConnectedDevice] {
        state.withLock { devices in
            (devices[account] ?? [:]).values.map { ConnectedDevice(device: $0.device, node: "local", connectedAt: $0.connectedAt) }
        }.sorted { $0.device.rawValue < $1.device.rawValue }
    }

    /// The number of `account`'s devices connected to this node.
    package func connectionCount(of account: AccountID) -> Int { state.withLock { $0[account]?.count ?? 0 } }

    /// What waits in the devices' outbound queues now.
    package var outboundQueues: OutboundQueues {
        var total = OutboundQueues()
        for queue in allQueues {
            let (frames, bytes) = queue.queued
            total.frames += frames
            total.bytes += bytes
            total.maxFrames = max(total.maxFrames, frames)
        }
        return total
    }
}

/// The frames and bytes waiting to be written to this node's devices, summed, and the frames of the deepest queue.
package struct OutboundQueues: Sendable {
    var frames = 0
    var bytes = 0
    var maxFrames = 0
}
