// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
public import CourierWire

/// Delivers events to the online devices of accounts on this node. Other nodes learn of a change from the database
/// (``ClusterFanout``), and publish its events on their own bus.
public protocol EventBus: Sendable {
    /// Called where the change's answer is written (a connection's event loop, a REST handler, the fan-out of other
    /// nodes' changes); it does not wait: events go to device queues, which write them on their own loops.
    func publish(_ publication: Publication)
}

/// An event and who gets it.
public struct Publication: Sendable {
    public let event: ServerEvent
    public let recipients: [AccountID]
    /// A group's members as a set (the group directory's, cached by membership version), besides `recipients`: a node
    /// with fewer accounts connected than the group has members walks its connected accounts and asks the set, instead
    /// of looking every member up (an event of a group of 10,000 with a few members online).
    public let members: Set<AccountID>?
    /// The connection that caused the event (it already has the result in its ack).
    public let excluded: ConnectionID?
    public init(event: ServerEvent, recipients: [AccountID], members: Set<AccountID>? = nil, excluded: ConnectionID?) {
        self.event = event
        self.recipients = recipients
        self.members = members
        self.excluded = excluded
    }
}

/// Fans events out to the devices connected to this node. Each event is encoded once, whatever the number of
/// recipients; `groupReceipts` events, which go to one account, are encoded when written, merged while they wait.
public struct LocalEventBus: EventBus {
    let registry: ConnectionRegistry
    let coder = FrameCoder()
    /// The highest counts this node sent of each recent group message (``GroupCountFloor``).
    let floor = GroupCountFloor()

    public init(registry: ConnectionRegistry) { self.registry = registry }

    public func publish(_ publication: Publication) {
        let queues =
            if let members = publication.members {
                registry.queues(of: members, and: publication.recipients, except: publication.excluded)
            } else {
                registry.queues(of: publication.recipients, except: publication.excluded)
            }
        // No device of a recipient here (a read's `readState` to the reader's other devices, mostly): encode nothing.
        guard !queues.isEmpty else { return }
        if case .groupReceipts(let counted) = publication.event {
            return publish(floor.raise(counted), to: queues)
        }
        let frame = coder.encode(ServerFrame.event(publication.event))
        for queue in queues { queue.enqueue(frame) }
    }

    private func publish(_ event: GroupReceiptsEvent, to queues: [DeviceQueue]) {
        if GroupReceiptMerge.readerEntries(of: event) < Change.maxReadersPerEvent {
            // Encoded by each device's writer, merged with the receipts waiting before it (ADR 0021). An event that
            // is full already (the app's batch reads) is encoded here, once, like any other.
            for queue in queues { queue.enqueue(event) }
            return
        }
        let frame = coder.encode(ServerFrame.event(.groupReceipts(event)))
        for queue in queues { queue.enqueue(frame) }
    }
}

/// A group message's counts as this node last sent them, so that they never go back on its devices (protocol.md:
/// `readCount` never decreases). Each read's event carries the counts its transaction saw; events of reads made
/// through other nodes reach this one later than its own (through the database's notifications), so a count of 1 from
/// another node could follow a count of 2 from this one. An event is sent with the highest read count and the lowest
/// unread count this node sent of that message before (its readers are its own): the counts of a later commit, which
/// the database will give again to anyone who asks. The most recent 16,384 messages are remembered (a message read
/// long ago gets few new reads, and a sync gives the counts as stored).
final class GroupCountFloor: Sendable {
    static let capacity = 16_384
    private struct State {
        var counts: [MessageID: (read: Int, unread: Int)] = [:]
        /// The messages in the order they were first counted, the oldest forgotten first.
        var order: [MessageID] = []
        var oldest = 0
    }
    private let state = Locked(State())

    /// `event` with each message's counts raised to those this node sent before, and those remembered.
    func raise(_ event: GroupReceiptsEvent) -> GroupReceiptsEvent {
        state.withLock { state in
            var changed = false
            let updates = event.updates.map { update -> GroupReceiptUpdate in
                let before = state.counts[update.messageID]
                let read = max(update.readCount, before?.read ?? 0)
                let unread = min(update.unreadCount, before?.unread ?? .max)
                if before == nil { Self.remember(update.messageID, in: &state) }
                state.counts[update.messageID] = (read, unread)
                guard read != update.readCount || unread != update.unreadCount else { return update }
                changed = true
                return GroupReceiptUpdate(
                    messageID: update.messageID,
                    seq: update.seq,
                    readers: update.readers,
                    contents: update.contents,
                    readCount: read,
                    unreadCount: unread
                )
            }
            return changed ? GroupReceiptsEvent(conversation: event.conversation, updates: updates) : event
        }
    }

    private static func remember(_ message: MessageID, in state: inout State) {
        if state.order.count < capacity {
            state.order.append(message)
            return
        }
        state.counts[state.order[state.oldest]] = nil
        state.order[state.oldest] = message
        state.oldest = (state.oldest + 1) % capacity
    }
}
