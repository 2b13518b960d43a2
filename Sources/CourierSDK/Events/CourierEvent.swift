// Courier — Apache-2.0

/// Something that happened, delivered in order through ``CourierClient/events()`` and to delegates.
///
/// An event is emitted only when the local store changed, so a message synced twice is reported once.
public enum CourierEvent: Sendable, Hashable {
    /// The connection state changed.
    case connectionStateChanged(ConnectionState)
    /// A new message arrived: from a peer, or sent by this account from another device. Messages of a conversation
    /// arrive in seq order (NIM `onRecvMessages`, Agora `messagesDidReceive`).
    case messageReceived(Message)
    /// Some of your messages reached the recipient (Agora `messagesDidDeliver`).
    case messageDelivered(DeliveryUpdate)
}

extension CourierEvent {
    /// The message, if this is `.messageReceived`.
    public var receivedMessage: Message? {
        if case .messageReceived(let message) = self { return message }
        return nil
    }
    /// The update, if this is `.messageDelivered`.
    public var deliveryUpdate: DeliveryUpdate? {
        if case .messageDelivered(let update) = self { return update }
        return nil
    }
    /// The state, if this is `.connectionStateChanged`.
    public var connectionState: ConnectionState? {
        if case .connectionStateChanged(let state) = self { return state }
        return nil
    }
}
