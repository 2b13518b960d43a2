// Courier — Apache-2.0
public import CourierWire

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
    /// A message was recalled; its local copy stays in place, bodiless, with status `recalled` (NIM
    /// `onRecvRevokeMessageNotification:`, Agora `messagesInfoDidRecall:`).
    case messageRecalled(RecallNotice)
    /// A message you hold was edited, by its sender (or a group's owner or admin, or the app's backend): the message
    /// as it is now, with its new ``Message/body``, ``Message/ext`` and ``Message/editedAt`` (Agora
    /// `onMessageContentChanged`, Stream `message.updated`). Replies that quote it quote the new text.
    case messageEdited(Message)
    /// A member added or removed a reaction on a message you hold (Agora `onReactionChanged`).
    case reactionsChanged(ReactionUpdate)
    /// The recipient read some of your messages (Agora `messagesDidRead`, NIM `onRecvMessageReceipts`).
    case messageRead(ReadUpdate)
    /// You read a conversation on another of your devices (Agora `onConversationRead`).
    case conversationRead(ConversationReadUpdate)
    /// A conversation's unread count changed: a message arrived, or you read on any of your devices.
    case unreadCountChanged(UnreadCountUpdate)
    /// Members read your group messages that asked for receipts (Agora `groupMessageDidRead`, RongCloud
    /// `onMessageReceiptResponse`).
    case groupReadReceiptsChanged(GroupReadReceiptUpdate)
    /// A group message's sender asked for read receipts after sending it (RongCloud `onMessageReceiptRequest`).
    case readReceiptsRequested(ReadReceiptRequest)
    /// The upload of a queued attachment moved (``AttachmentUploader``).
    case uploadProgress(UploadProgress)
    /// Who is typing in a conversation changed: someone started, stopped, sent a message, or their indicator ran
    /// out (NIM's and Agora's typing notifications, RongCloud `onTypingStatusChanged:targetId:status:`).
    case typingChanged(TypingUpdate)
    /// An account's profile changed: yours (on another device, or by your backend) or a contact's, or one came that
    /// this device did not hold (NIM `onUserInfoChanged:`, Agora `onUserInfoUpdated`).
    case profileChanged(AccountProfile)
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
    /// The notice, if this is `.messageRecalled`.
    public var recallNotice: RecallNotice? {
        if case .messageRecalled(let notice) = self { return notice }
        return nil
    }
    /// The message as edited, if this is `.messageEdited`.
    public var editedMessage: Message? {
        if case .messageEdited(let message) = self { return message }
        return nil
    }
    /// The update, if this is `.reactionsChanged`.
    public var reactionUpdate: ReactionUpdate? {
        if case .reactionsChanged(let update) = self { return update }
        return nil
    }
    /// The update, if this is `.messageRead`.
    public var readUpdate: ReadUpdate? {
        if case .messageRead(let update) = self { return update }
        return nil
    }
    /// The update, if this is `.conversationRead`.
    public var conversationReadUpdate: ConversationReadUpdate? {
        if case .conversationRead(let update) = self { return update }
        return nil
    }
    /// The update, if this is `.unreadCountChanged`.
    public var unreadCountUpdate: UnreadCountUpdate? {
        if case .unreadCountChanged(let update) = self { return update }
        return nil
    }
    /// The update, if this is `.groupReadReceiptsChanged`.
    public var groupReadReceiptUpdate: GroupReadReceiptUpdate? {
        if case .groupReadReceiptsChanged(let update) = self { return update }
        return nil
    }
    /// The request, if this is `.readReceiptsRequested`.
    public var readReceiptRequest: ReadReceiptRequest? {
        if case .readReceiptsRequested(let request) = self { return request }
        return nil
    }
    /// The profile, if this is `.profileChanged`.
    public var changedProfile: AccountProfile? {
        if case .profileChanged(let profile) = self { return profile }
        return nil
    }
    /// The update, if this is `.typingChanged`.
    public var typingUpdate: TypingUpdate? {
        if case .typingChanged(let update) = self { return update }
        return nil
    }
    /// The state, if this is `.connectionStateChanged`.
    public var connectionState: ConnectionState? {
        if case .connectionStateChanged(let state) = self { return state }
        return nil
    }
}
