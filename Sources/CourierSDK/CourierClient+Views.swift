// Courier — Apache-2.0
internal import Foundation
internal import Logging
public import CourierWire

/// Your own view of your conversations (ADR 0029): delete for me, clear for me, mute, pin — kept by the server and
/// synced to all your devices, new installs included — and a draft, kept on this device. Nobody else sees any of it.
///
/// Each change shows on this device at once and is queued like a send: connected, the call returns once the server
/// has it (and throws its refusal); offline it returns at once and the change goes out, in order, when the client
/// connects again (a refusal then is logged, and a sync puts back the server's view).
extension CourierClient {
    /// Deletes messages for your account only: they disappear from every local query on all your devices (and on a
    /// new install), stop counting as unread, and stay for everyone else. At most 100 per call.
    ///
    /// NIM `deleteMessageFromServer:ext:completion:`, Agora `removeMessagesFromServerMessageIds:completion:`,
    /// RongCloud `deleteRemoteMessage:targetId:messages:success:error:`.
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
    /// messages), RongCloud `removeConversation:targetId:`.
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

    /// Queues the change, shows it here at once, and — connected — waits until the server has it (its refusal is
    /// thrown then). Offline it returns at once: the change goes out, in order, on the next connection.
    private func changeView(_ request: ChangeViewRequest) async throws {
        let me = try member(of: request.conversation)
        let token = UUID().uuidString
        viewWaiters.register(token)
        let link = state.withLock { $0.link }
        do {
            let now = Timestamp(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            try await store.queueViewChange(request, token: token, at: now, me: me, then: publisher(for: link))
        } catch {
            viewWaiters.cancel(token)
            throw error
        }
        guard let link else {
            viewWaiters.cancel(token)
            return
        }
        link.signal()
        try await viewWaiters.wait(for: token, timeout: configuration.requestTimeout, clock: configuration.clock)
    }

    /// Sends the queued view changes, oldest first. A refused one is dropped (retrying cannot succeed): its caller,
    /// if still waiting, gets the error, and a sync puts back the view the server holds; a lost connection, or
    /// `store.unavailable`, keeps the rest queued; `rate.limited` is waited out.
    func flushViewChanges(on link: Link, me: AccountID) async throws {
        for queued in try await store.queuedViewChanges() {
            var reply = try await link.request { .changeView($0, queued.request) }
            while case .failure(let error) = reply, error.code == .rateLimited {
                try await configuration.clock.sleep(for: .milliseconds(error.retryAfterMs ?? 1000))
                reply = try await link.request { .changeView($0, queued.request) }
            }
            switch reply {
            case .success(.changeView(let ack)):
                try await store.completeViewChange(queued.id, with: ack, me: me, then: publisher(for: link))
                viewWaiters.resolve(queued.token, with: .success(()))
            case .failure(let error) where error.code.isRetriedLater:
                throw CourierError(error, conversation: queued.request.conversation)
            case .failure(let error):
                configuration.logger.info("View change refused", metadata: ["courier.error": "\(error.code)"])
                try await store.completeViewChange(queued.id, with: nil, me: me, then: publisher(for: link))
                // What this device showed at once was not made: the server's view comes back with a sync.
                link.requestResync()
                viewWaiters.resolve(queued.token, with: .failure(CourierError(error, conversation: queued.request.conversation)))
            default:
                throw CourierError.unexpectedReply
            }
        }
    }
}
