// Courier — Apache-2.0
public import CourierWire

/// Receives the client's events on the main actor, in event order — the UIKit-style alternative to
/// ``CourierClient/events()``, fed from the same events (NIM `NIMChatManagerDelegate`, Agora `AgoraChatManagerDelegate`).
///
/// Every method is optional. Register any number of delegates with ``CourierClient/addDelegate(_:)``; they are held
/// weakly.
@MainActor
public protocol CourierClientDelegate: AnyObject {
    func courierClient(_ client: CourierClient, didChangeConnectionState state: ConnectionState)
    func courierClient(_ client: CourierClient, didReceive message: Message)
    func courierClient(_ client: CourierClient, didDeliver update: DeliveryUpdate)
    func courierClient(_ client: CourierClient, didRead update: ReadUpdate)
    func courierClient(_ client: CourierClient, didRecall notice: RecallNotice)
    /// A message was edited (``CourierEvent/messageEdited(_:)``).
    func courierClient(_ client: CourierClient, didEdit message: Message)
    /// A reaction was added or removed (``CourierEvent/reactionsChanged(_:)``).
    func courierClient(_ client: CourierClient, didChangeReactions update: ReactionUpdate)
    func courierClient(_ client: CourierClient, didReadConversation update: ConversationReadUpdate)
    func courierClient(_ client: CourierClient, didChangeUnreadCount update: UnreadCountUpdate)
    func courierClient(_ client: CourierClient, didChangeGroupReadReceipts update: GroupReadReceiptUpdate)
    func courierClient(_ client: CourierClient, didRequestReadReceipts request: ReadReceiptRequest)
    /// An attachment's upload moved (NIM `sendMessage:progress:`, Agora's `progress` block).
    func courierClient(_ client: CourierClient, didProgressUpload progress: UploadProgress)
    /// Who is typing in a conversation changed (RongCloud `onTypingStatusChanged:targetId:status:`).
    func courierClient(_ client: CourierClient, didChangeTyping update: TypingUpdate)
    /// An account's profile changed (``CourierEvent/profileChanged(_:)``).
    func courierClient(_ client: CourierClient, didChangeProfile profile: AccountProfile)
}

extension CourierClientDelegate {
    public func courierClient(_ client: CourierClient, didChangeConnectionState state: ConnectionState) {}
    public func courierClient(_ client: CourierClient, didReceive message: Message) {}
    public func courierClient(_ client: CourierClient, didDeliver update: DeliveryUpdate) {}
    public func courierClient(_ client: CourierClient, didRead update: ReadUpdate) {}
    public func courierClient(_ client: CourierClient, didRecall notice: RecallNotice) {}
    public func courierClient(_ client: CourierClient, didEdit message: Message) {}
    public func courierClient(_ client: CourierClient, didChangeReactions update: ReactionUpdate) {}
    public func courierClient(_ client: CourierClient, didReadConversation update: ConversationReadUpdate) {}
    public func courierClient(_ client: CourierClient, didChangeUnreadCount update: UnreadCountUpdate) {}
    public func courierClient(_ client: CourierClient, didChangeGroupReadReceipts update: GroupReadReceiptUpdate) {}
    public func courierClient(_ client: CourierClient, didRequestReadReceipts request: ReadReceiptRequest) {}
    public func courierClient(_ client: CourierClient, didProgressUpload progress: UploadProgress) {}
    public func courierClient(_ client: CourierClient, didChangeTyping update: TypingUpdate) {}
    public func courierClient(_ client: CourierClient, didChangeProfile profile: AccountProfile) {}
}

/// Weak references to delegates.
final class DelegateRegistry: Sendable {
    private struct Entry {
        weak var delegate: (any CourierClientDelegate)?
    }
    private let entries = Locked<[Entry]>([])

    func add(_ delegate: any CourierClientDelegate) {
        entries.withLock { list in
            list.removeAll { $0.delegate == nil || $0.delegate === delegate }
            list.append(Entry(delegate: delegate))
        }
    }

    func remove(_ delegate: any CourierClientDelegate) {
        entries.withLock { list in list.removeAll { $0.delegate == nil || $0.delegate === delegate } }
    }

    @MainActor
    func dispatch(_ event: CourierEvent, from client: CourierClient) {
        let delegates = entries.withLock { list in list.compactMap(\.delegate) }
        for delegate in delegates {
            switch event {
            case .connectionStateChanged(let state): delegate.courierClient(client, didChangeConnectionState: state)
            case .messageReceived(let message): delegate.courierClient(client, didReceive: message)
            case .messageDelivered(let update): delegate.courierClient(client, didDeliver: update)
            case .messageRead(let update): delegate.courierClient(client, didRead: update)
            case .messageRecalled(let notice): delegate.courierClient(client, didRecall: notice)
            case .messageEdited(let message): delegate.courierClient(client, didEdit: message)
            case .reactionsChanged(let update): delegate.courierClient(client, didChangeReactions: update)
            case .conversationRead(let update): delegate.courierClient(client, didReadConversation: update)
            case .unreadCountChanged(let update): delegate.courierClient(client, didChangeUnreadCount: update)
            case .groupReadReceiptsChanged(let update):
                delegate.courierClient(client, didChangeGroupReadReceipts: update)
            case .readReceiptsRequested(let request): delegate.courierClient(client, didRequestReadReceipts: request)
            case .uploadProgress(let progress): delegate.courierClient(client, didProgressUpload: progress)
            case .typingChanged(let update): delegate.courierClient(client, didChangeTyping: update)
            case .profileChanged(let profile): delegate.courierClient(client, didChangeProfile: profile)
            }
        }
    }
}
