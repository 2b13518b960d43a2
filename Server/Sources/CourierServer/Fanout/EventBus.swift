// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
public import CourierWire

/// Delivers events to the online devices of accounts. The local bus reaches devices on this node; a Postgres bus
/// (scale-out) also notifies other nodes.
public protocol EventBus: Sendable {
    /// Called where the change's answer is written (a connection's event loop, a REST handler, the fan-out of other
    /// nodes' changes); it does not wait: events go to device queues, which write them on their own loops.
    func publish(_ publication: Publication)
}

/// An event and who gets it.
public struct Publication: Sendable {
    public let event: ServerEvent
    public let recipients: [AccountID]
    /// The connection that caused the event (it already has the result in its ack).
    public let excluded: ConnectionID?
    public init(event: ServerEvent, recipients: [AccountID], excluded: ConnectionID?) {
        self.event = event
        self.recipients = recipients
        self.excluded = excluded
    }
}

/// Fans events out to the devices connected to this node. Each event is encoded once, whatever the number of
/// recipients; `groupReceipts` events, which go to one account, are encoded when written, merged while they wait.
public struct LocalEventBus: EventBus {
    let registry: ConnectionRegistry
    let coder = FrameCoder()

    public init(registry: ConnectionRegistry) { self.registry = registry }

    public func publish(_ publication: Publication) {
        let queues = registry.queues(of: publication.recipients, except: publication.excluded)
        // No device of a recipient here (a read's `readState` to the reader's other devices, mostly): encode nothing.
        guard !queues.isEmpty else { return }
        if case .groupReceipts(let event) = publication.event,
            GroupReceiptMerge.readerEntries(of: event) < Change.maxReadersPerEvent
        {
            // Encoded by each device's writer, merged with the receipts waiting before it (ADR 0021). An event that
            // is full already (the app's batch reads) is encoded here, once, like any other.
            for queue in queues { queue.enqueue(event) }
            return
        }
        let frame = coder.encode(ServerFrame.event(publication.event))
        for queue in queues { queue.enqueue(frame) }
    }
}
