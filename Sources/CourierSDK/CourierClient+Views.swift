// Courier — Apache-2.0

/// Your own view of your conversations (ADR 0029): delete for me, clear for me, mute, pin — kept by the server and
/// synced to all your devices, new installs included — and a draft, kept on this device. Nobody else sees any of it.
extension CourierClient {
    /// Deletes messages for your account only: they disappear from every local query on all your devices (and on a
    /// new install), stop counting as unread, and stay for everyone else. At most 100 per call.
    ///
    /// NIM `deleteMessageFromServer:ext:completion:`, Agora `removeMessagesFromServerMessageIds:completion:`,
    /// RongCloud `deleteRemoteMessage:targetId:messages:success:error:`. Needs a connection (``CourierError/notConnected``).
    public func deleteForMe(_ messages: [MessageID], in conversation: ConversationID) async throws {
        try await changeView(ChangeViewRequest(conversation: conversation, deleteMessageIds: messages))
    }

    /// Clears a conversation for your account: every message up to the newest one now disappears from all your
    /// devices and stops counting as unread; the conversation stays, and new messages show as usual.
    ///
    /// NIM `deleteSelfRemoteSession:option:completion:`, Agora `removeMessagesFromServerWithTimeStamp:completion:`,
    /// RongCloud `clearRemoteHistoryMessages:targetId:recordTime:success:error:`.
    public func clear(_ conversation: ConversationID) async throws {
        try await changeView(ChangeViewRequest(conversation: conversation, clear: true))
    }

    /// Mutes or unmutes a conversation on all your devices: your app's push recipe sees `muted` for you in
    /// `message.undelivered` (docs/webhooks.md) and decides what to send.
    ///
    /// RongCloud `setConversationNotificationStatus:targetId:isBlocked:success:error:`, Agora
    /// `setSilentModeForConversation:conversationType:params:completion:`, NIM `updateNotifyState:forUser:completion:`.
    public func setMuted(_ muted: Bool, in conversation: ConversationID) async throws {
        try await changeView(ChangeViewRequest(conversation: conversation, muted: muted))
    }

    /// Pins or unpins a conversation on all your devices: ``conversations()`` lists pinned ones first, the most
    /// recently pinned on top.
    ///
    /// RongCloud `setConversationToTop:targetId:isTop:`, Agora `pinConversation:isPinned:completionBlock:`, NIM
    /// `addStickTopSession:completion:` / `removeStickTopSession:completion:`.
    public func setPinned(_ pinned: Bool, in conversation: ConversationID) async throws {
        try await changeView(ChangeViewRequest(conversation: conversation, pinned: pinned))
    }

    /// Hides a conversation from your list on all your devices (``conversations()``, ``liveConversations()``,
    /// ``ConversationListModel``) until a newer message arrives, which shows it again by itself; `false` shows it at
    /// once. Its messages stay and still count as unread (``clear(_:)`` removes them).
    ///
    /// NIM `deleteRecentSession:option:`, Agora `deleteConversation:isDeleteMessages:completion:` (without deleting
    /// messages), RongCloud `removeConversation:targetId:`. Needs a connection (``CourierError/notConnected``).
    public func setHidden(_ hidden: Bool, in conversation: ConversationID) async throws {
        try await changeView(ChangeViewRequest(conversation: conversation, hidden: hidden))
    }

    /// Keeps what you were typing with the conversation, on this device only (``Conversation/draft``; `nil` or empty
    /// clears it). RongCloud `saveTextMessageDraft:targetId:content:`.
    public func setDraft(_ draft: String?, in conversation: ConversationID) async throws {
        try await store.setDraft(draft, in: conversation)
    }

    /// The lowest seq a chat screen shows: 1, or the one after what you cleared.
    func oldestShown(in conversation: ConversationID) async throws -> Seq {
        Seq(try await store.clearedSeq(in: conversation).rawValue + 1)
    }

    private func changeView(_ request: ChangeViewRequest) async throws {
        let me = try member(of: request.conversation)
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        switch try await link.request({ .changeView($0, request) }) {
        case .success(.changeView(let ack)):
            try await store.apply(ack, me: me, then: publisher(for: link))
        case .failure(let error):
            throw CourierError(error, conversation: request.conversation)
        default:
            throw CourierError.unexpectedReply
        }
    }
}
