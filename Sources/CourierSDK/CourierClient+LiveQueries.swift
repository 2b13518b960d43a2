// Courier — Apache-2.0
public import Foundation
internal import GRDB
public import CourierWire

/// One row of a chat screen: a message stored on this device, one of yours still in the outbox, or a tip your app
/// inserted on this device.
///
/// Its ``id`` stays the same when a message you send goes from the outbox to the server (sending → sent), so a
/// SwiftUI `List` or `ForEach` keeps the row in place instead of removing and inserting it.
public enum ChatItem: Sendable, Hashable, Identifiable {
    case message(Message)
    case pending(PendingMessage)
    /// A tip your app put here (``CourierClient/insertTip(_:in:)``), on this device only.
    case tip(LocalTip)

    /// Your messages go by their client id (the same before and after the server's ack); others' by their server id.
    public var id: String {
        switch self {
        case .message(let message) where message.isOwn: "own:" + message.clientID.rawValue
        case .message(let message): "msg:" + message.id.rawValue
        case .pending(let pending): "own:" + pending.clientID.rawValue
        case .tip(let tip): "tip:" + tip.id
        }
    }

    /// The idempotency key the message was sent with; a tip's own id (it is never sent).
    public var clientID: ClientMessageID {
        switch self {
        case .message(let message): message.clientID
        case .pending(let pending): pending.clientID
        case .tip(let tip): ClientMessageID(rawValue: "tip:" + tip.id)
        }
    }

    /// `.sending` or `.failed` in the outbox; then as ``Message/status``; `.sent` for a tip (it is stored here).
    public var status: MessageStatus {
        switch self {
        case .message(let message): message.status
        case .pending(let pending): pending.status
        case .tip: .sent
        }
    }

    public var body: String {
        switch self {
        case .message(let message): message.body
        case .pending(let pending): pending.body
        case .tip(let tip): tip.text
        }
    }

    /// The stored message; `nil` while it is in the outbox.
    public var message: Message? {
        if case .message(let message) = self { return message }
        return nil
    }

    /// Whether this account sent it (a row still in the outbox always is).
    public var isOwn: Bool {
        switch self {
        case .message(let message): message.isOwn
        case .pending: true
        case .tip: false
        }
    }

    /// Who sent it; `nil` for your message still in the outbox (it is yours: ``isOwn``) and for a tip.
    public var sender: AccountID? { message?.sender }

    /// The sender's profile as this device last heard of it (``Message/senderProfile``): the name and avatar to draw
    /// beside the row; `nil` for a row still in the outbox, a tip, or a sender whose profile is not known yet.
    public var senderProfile: AccountProfile? { message?.senderProfile }

    /// The row's reactions (``Message/reactions``): a count per reaction, in reaction order; none for a row still in
    /// the outbox or a tip.
    public var reactions: [ReactionCount] { message?.reactions ?? [] }

    /// Your own reactions on the row (``Message/myReactions``).
    public var myReactions: [String] { message?.myReactions ?? [] }

    /// When the row's message was last edited (``Message/editedAt``): show "edited" beside it.
    public var editedAt: Timestamp? { message?.editedAt }

    /// When the server stored it, or when you queued it while it is in the outbox.
    public var date: Date {
        switch self {
        case .message(let message): message.date
        case .pending(let pending): pending.createdAt
        case .tip(let tip): tip.date
        }
    }

    /// What it holds, decoded (text, an attachment, or your app's own type).
    public var content: MessageContent {
        switch self {
        case .message(let message): message.content
        case .pending(let pending): pending.content
        case .tip(let tip): .text(tip.text)
        }
    }

    /// What to draw for it.
    public var kind: Kind {
        switch self {
        case .pending: .message
        case .tip: .tip
        case .message(let message):
            switch message.kind {
            case .recallTip: .recallTip
            case .groupChange: .groupNotice(message.groupChange)
            case .message: message.status == .recalled ? .recalled : .message
            }
        }
    }

    /// What a row is: a message, the tombstone of a recalled one, a tip in its place, a group membership notice.
    public enum Kind: Sendable, Hashable {
        case message
        /// A message recalled by its sender, an admin or the app: show "message recalled" (its body is gone).
        case recalled
        /// A local tip the app put in place of a recalled message (``CourierClient/insertRecallTip(for:text:)``).
        case recallTip
        /// A tip the app put in the chat on this device (``CourierClient/insertTip(_:in:)``).
        case tip
        /// Who joined, left, was removed, or changed role.
        case groupNotice(GroupChange?)
    }
}

extension CourierClient {
    /// A conversation's chat screen, live: the newest `limit` stored messages in seq order, then your messages still
    /// in the outbox, emitted at once and again after every change that affects them — a message arriving, your send
    /// acknowledged, a delivery or read receipt, a group read count rising, a recall — whether it came from the
    /// server or from this device. Works offline, before ``connect(account:token:)`` when the client knows its
    /// account (see ``init(account:configuration:)``).
    ///
    /// Consecutive emissions differ; several changes in quick succession may arrive as one. In SwiftUI:
    ///
    /// ```swift
    /// struct ChatView: View {
    ///     let client: CourierClient
    ///     let conversation: ConversationID
    ///     @State private var items: [ChatItem] = []
    ///
    ///     var body: some View {
    ///         List(items) { item in
    ///             HStack { Text(item.status == .recalled ? "Message recalled" : item.body); Spacer(); Text(item.status.rawValue) }
    ///         }
    ///         .task {
    ///             do { for try await items in client.liveMessages(in: conversation) { self.items = items } } catch {}
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// NIM `NIMConversationManagerDelegate` + `messagesInSession`, Agora `AgoraChatManagerDelegate` + `loadMessages`,
    /// RongCloud `RCIMClientReceiveMessageDelegate` + `getHistoryMessages`: one stream instead of a query and callbacks.
    ///
    /// - Throws (while iterating): ``CourierError/noAccount`` when the client has no account yet;
    ///   ``CourierError/localStore(_:)``.
    public func liveMessages(in conversation: ConversationID, limit: Int = 50) -> AsyncThrowingStream<[ChatItem], any Error>
    {
        let limit = max(1, limit)
        return chatItems(in: conversation) { db, me in
            try LocalStore.fetchMessages(db, conversation, before: nil, limit: limit, me: me)
        }
    }

    /// A chat screen's window, live: every stored message from seq `first` on, then your messages still in the
    /// outbox; with `last`, the stored messages up to it and no outbox (the window stops short of the newest).
    /// ``ChatModel`` moves `first` back and `last` on as it pages.
    func liveMessages(in conversation: ConversationID, from first: Seq, through last: Seq?)
        -> AsyncThrowingStream<[ChatItem], any Error>
    {
        chatItems(in: conversation, outbox: last == nil) { db, me in
            try LocalStore.fetchMessages(db, conversation, from: first, through: last, me: me)
        }
    }

    /// The `stored` messages, then (with `outbox`) your messages of `conversation` still in the outbox, live.
    private func chatItems(
        in conversation: ConversationID,
        outbox: Bool = true,
        stored: @escaping @Sendable (Database, AccountID) throws -> [Message]
    ) -> AsyncThrowingStream<[ChatItem], any Error> {
        observe { db, me in
            try LocalStore.withTips(db, try stored(db, me), in: conversation)
                + (outbox ? LocalStore.fetchPendingMessages(db, in: conversation).map(ChatItem.pending) : [])
        }
    }

    /// The conversation list, live: most recently active first, each with its last message (status
    /// ``MessageStatus/recalled`` once recalled: show "message recalled" there) and unread count, emitted at once and
    /// again after every change — a new message, a read on this or another device, a recall. Works offline, like
    /// ``liveMessages(in:limit:)``.
    ///
    /// NIM `allRecentSessions` + `didUpdateRecentSession`, Agora `getAllConversations` + `conversationListDidUpdate:`,
    /// RongCloud `getConversationList` + its receive callbacks.
    public func liveConversations() -> AsyncThrowingStream<[Conversation], any Error> {
        observe { db, me in try LocalStore.fetchConversations(db, me: me) }
    }

    /// The total unread count across conversations, live (NIM `allUnreadCount`, Agora `getUnreadMessageCount`): for a
    /// tab badge. `includingMuted: false` leaves out the conversations you muted.
    public func liveTotalUnreadCount(includingMuted: Bool = true) -> AsyncThrowingStream<Int, any Error> {
        observe { db, _ in try LocalStore.totalUnreadCount(db, includingMuted: includingMuted) }
    }

    /// Runs `fetch` now and after every commit that changes what it read (GRDB `ValueObservation`), and streams
    /// its distinct results. Ends when the consumer stops iterating.
    private func observe<Value: Sendable & Equatable>(
        _ fetch: @escaping @Sendable (Database, AccountID) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        let store = self.store
        let account = state.withLock { $0.account }
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    guard let me = account else { throw CourierError.noAccount }
                    let observation = ValueObservation.tracking { db in try fetch(db, me) }.removeDuplicates()
                    for try await value in observation.values(in: try store.writer) {
                        continuation.yield(value)
                    }
                    continuation.finish()
                } catch {
                    // A cancellation ends the stream without an error.
                    continuation.finish(throwing: CourierError.shown(error))
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
