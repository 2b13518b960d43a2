// Courier — Apache-2.0
internal import Foundation
public import CourierWire

/// A message you sent, from the moment it is in this device's outbox: what
/// ``CourierClient/send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(MessageContent,_,_,_,_,_)`` returns.
///
/// The send is done when the handle comes back: the message is queued on this device, shows as a pending row
/// (``ChatItem/pending(_:)``), and goes out as soon as the client is connected — now, after a reconnect, or after a
/// relaunch. Nothing about the network can make that call fail, so retrying it on an error never sends a message
/// twice. Follow the message with ``stored()``, watch its attachment go up with ``uploadProgress``, or take it back
/// before it goes with ``cancel()``.
///
/// ```swift
/// let sending = try await client.send("On my way", to: conversation)
/// let message = try await sending.stored()  // the server's id, seq and time
/// ```
///
/// NIM `sendMessage:toSession:error:` (returns once queued; `NIMChatManagerDelegate` reports `sendMessage:progress:`
/// and `sendMessage:didCompleteWithError:`), Agora `sendMessage:progress:completion:`, RongCloud
/// `sendMessage:…success:error:` (its `RCMessage` in between).
public struct SendHandle: Sendable, Hashable, Identifiable {
    /// The message's idempotency key: the id of its pending row and, once stored, ``Message/clientID``.
    public let clientID: ClientMessageID
    public let conversation: ConversationID
    let client: CourierClient

    public var id: ClientMessageID { clientID }

    public static func == (lhs: SendHandle, rhs: SendHandle) -> Bool {
        lhs.clientID == rhs.clientID && lhs.conversation == rhs.conversation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(clientID)
        hasher.combine(conversation)
    }

    /// Waits until the server has stored the message durably, and returns it (with its id, seq and time); at once
    /// when it already has. It waits as long as that takes, across disconnects, reconnects and the server's
    /// outages: cancel the task that waits to stop waiting (the message stays queued and still goes out).
    ///
    /// - Throws: the server's refusal — ``CourierError/bodyTooLarge(_:)``, ``CourierError/notAMember(_:)``,
    ///   ``CourierError/accountNotFound(_:)``, … — or ``CourierError/uploadFailed(_:)``: the row is then
    ///   ``MessageStatus/failed``, for ``CourierClient/retryFailedMessage(_:)`` or
    ///   ``CourierClient/discardFailedMessage(_:)``. ``CourierError/cancelled`` when the waiting task was cancelled,
    ///   or the message was taken back (``cancel()``, a discard) and will never be stored.
    @discardableResult
    public func stored() async throws -> Message {
        try await client.stored(clientID, in: conversation)
    }

    /// How far the upload of the message's attachment has gone, 0…1, from now until it ends (a message without a
    /// file to upload reports nothing). The same as ``CourierEvent/uploadProgress(_:)`` for this message; the stream
    /// ends when the message is stored, refused or cancelled, or when the task iterating it is cancelled.
    public var uploadProgress: AsyncStream<Double> {
        let events = client.events()
        let (clientID, client) = (self.clientID, self.client)
        return AsyncStream { continuation in
            let task = Task {
                for await event in events {
                    guard case .uploadProgress(let progress) = event, progress.clientID == clientID else { continue }
                    continuation.yield(progress.fraction)
                    if progress.fraction >= 1 { break }
                }
                continuation.finish()
            }
            // Ends with the send: stored, refused or taken back.
            let end = Task {
                _ = try? await client.stored(clientID, in: conversation)
                task.cancel()
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                end.cancel()
            }
        }
    }

    /// Takes the message back before it goes out: it leaves the outbox (and the chat), an upload under way stops,
    /// and ``stored()`` throws ``CourierError/cancelled``. A message already on its way to the server — or stored —
    /// cannot be taken back this way (recall it: ``CourierClient/recall(_:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``).
    /// NIM `cancelSendingMessage:`, Agora's `cancelDownload`-style calls do the same for an attachment under way.
    ///
    /// - Returns: Whether it was taken back; `false` when it had already gone out (or was not queued here).
    @discardableResult
    public func cancel() async throws -> Bool {
        try await client.cancelSend(clientID, in: conversation)
    }
}

extension CourierClient {
    /// The handle of a message you queued earlier — a ``PendingMessage`` after a relaunch, say — to follow it or take
    /// it back, as ``send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(MessageContent,_,_,_,_,_)`` returned it.
    public func sendHandle(for clientID: ClientMessageID, in conversation: ConversationID) -> SendHandle {
        SendHandle(clientID: clientID, conversation: conversation, client: self)
    }

    /// ``SendHandle/stored()``: the message as the server stored it, once it has.
    func stored(_ clientID: ClientMessageID, in conversation: ConversationID) async throws -> Message {
        let me = try boundAccount()
        // Registered before looking, so that an answer arriving in between is kept for this waiter.
        sendWaiters.register(clientID)
        let state: LocalStore.SendState
        do {
            state = try await store.sendState(of: clientID, in: conversation, me: me)
        } catch {
            sendWaiters.forget(clientID)
            throw error
        }
        // Settled already: the wait registered above is not needed.
        if state != .pending { sendWaiters.forget(clientID) }
        switch state {
        case .stored(let id):
            guard let message = try await store.message(id, me: me) else { throw CourierError.cancelled }
            return message
        case .failed(let error): throw error
        case .unknown: throw CourierError.cancelled
        case .pending:
            do {
                return try await sendWaiters.wait(for: clientID)
            } catch is CancellationError {
                throw CourierError.cancelled
            }
        }
    }

    /// ``SendHandle/cancel()``: removes a queued message that is not on its way; whether it did.
    func cancelSend(_ clientID: ClientMessageID, in conversation: ConversationID) async throws -> Bool {
        _ = try boundAccount()
        // Claimed here, the flush will not submit it; one it submitted already cannot be claimed.
        let queuedHere = state.withLock { state -> Bool? in
            guard !state.sendsOnTheirWay.contains(clientID) else { return nil }
            state.sendsTakenBack.insert(clientID)
            return state.sendsQueuedHere.contains(clientID)
        }
        guard let queuedHere else { return false }
        let removed: Bool
        do {
            // Queued by an earlier run, it may have gone out then, unless its file is still to upload.
            removed = try await store.removeFromOutbox(clientID, in: conversation, onlyUploading: !queuedHere)
        } catch {
            _ = state.withLock { $0.sendsTakenBack.remove(clientID) }
            throw error
        }
        guard removed else {
            _ = state.withLock { $0.sendsTakenBack.remove(clientID) }
            return false
        }
        // The claim stays: a flush that read the outbox before the row went must not send it.
        state.withLock { $0.uploads[clientID] }?.cancel()
        sendWaiters.resolve(clientID, with: .failure(CourierError.cancelled))
        return true
    }
}
