// Courier — Apache-2.0
internal import Foundation
internal import Logging
public import CourierWire

extension CourierClient {
    /// Sends a message: queues it on this device and returns at once with a ``SendHandle`` to follow it. The message
    /// shows as a pending row (status `sending`) in ``liveMessages(in:limit:)`` and ``ChatModel``, goes out as soon as
    /// the client is connected (now, or after a reconnect or a relaunch), and becomes `sent` in place; a refusal
    /// makes it `failed`, to retry (``retryFailedMessage(_:)``) or discard (``discardFailedMessage(_:)``). Await
    /// ``SendHandle/stored()`` for the message as the server stored it.
    ///
    /// Offline, it returns as soon as the message is queued: no network error can make it throw, so "try again on an
    /// error" never queues a message twice. Sending is idempotent on `(account, clientID)` too: a repeat with the same
    /// `clientID` — after a relaunch, or with a new token — stores nothing twice.
    ///
    /// ```swift
    /// let sending = try await client.send("On my way", to: conversation)
    /// let message = try await sending.stored()
    /// ```
    ///
    /// Equivalent to NIM `sendMessage:toSession:error:`, Agora `sendMessage:progress:completion:`, RongCloud
    /// `sendMessage`: each returns before the server answers, as this does.
    ///
    /// - Parameters:
    ///   - body: The text; at most the server's `maxBodyBytes` UTF-8 bytes. Attachments and app-defined messages go
    ///     through ``send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(MessageContent,_,_,_,_,_)``.
    ///   - conversation: Where to send it, e.g. `.direct("alice", "bob")`.
    ///   - replyTo: A message of the conversation this one replies to; the server attaches a quoted excerpt of it
    ///     (``Message/quote``), which disappears if that message is recalled.
    ///   - needsReadReceipt: Groups: ask the members for read receipts (NIM `teamReceiptEnabled`, Agora
    ///     `isNeedGroupAck`). The server's policy may limit who may ask, and in which group sizes.
    ///   - ext: Key-values stored and sent with the message (``Message/ext``; NIM `remoteExt`, Agora `ext`, RongCloud
    ///     `expansionDic`): at most 64 keys of 1–64 characters and 4,096 bytes in all.
    ///   - clientID: The idempotency key; a random one when `nil`.
    /// - Returns: The queued message's handle.
    /// - Throws: Only what this device can tell before queuing: ``CourierError/bodyTooLarge(_:)`` (against the
    ///   server's last published limit), ``CourierError/notAMember(_:)`` for a direct conversation of others,
    ///   ``CourierError/invalidInput(code:message:)`` for a bad `ext` or `clientID`, ``CourierError/noAccount`` before
    ///   the client knows its account, ``CourierError/localStore(_:)``. The server's refusals come from
    ///   ``SendHandle/stored()``.
    @discardableResult
    public func send(
        _ body: String,
        to conversation: ConversationID,
        replyTo: MessageID? = nil,
        needsReadReceipt: Bool = false,
        ext: [String: String]? = nil,
        clientID: ClientMessageID? = nil
    ) async throws -> SendHandle {
        try await send(
            .text(body),
            to: conversation,
            replyTo: replyTo,
            needsReadReceipt: needsReadReceipt,
            ext: ext,
            clientID: clientID
        )
    }

    /// Sends an attachment or a message type your app defines, as ``send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(String,_,_,_,_,_)``
    /// sends text: queued, returned at once, idempotent on `clientID`. An attachment whose `url` is a file on this
    /// device is uploaded first (``AttachmentUploader``; its progress on ``SendHandle/uploadProgress``).
    ///
    /// ```swift
    /// let photo = Attachment(url: uploadedURL, mimeType: "image/jpeg", size: 48_213, width: 1024, height: 768)
    /// try await client.send(.image(photo), to: conversation)
    /// try await client.send(.custom(type: "location", json: #"{"lat":48.85,"lon":2.35}"#), to: conversation)
    /// ```
    ///
    /// NIM `sendMessage` with a message object, Agora `sendMessage` with a message body, RongCloud `sendMessage` with
    /// a message content.
    ///
    /// - Throws: as the text variant; ``CourierError/invalidInput(code:message:)`` for a custom type that is not
    ///   1–64 characters of `[A-Za-z0-9._:-]` starting with a letter, or that names a built-in type.
    @discardableResult
    public func send(
        _ content: MessageContent,
        to conversation: ConversationID,
        replyTo: MessageID? = nil,
        needsReadReceipt: Bool = false,
        ext: [String: String]? = nil,
        clientID: ClientMessageID? = nil
    ) async throws -> SendHandle {
        let message = try outgoing(
            content, to: conversation, replyTo: replyTo, needsReadReceipt: needsReadReceipt, ext: ext, clientID: clientID
        )
        try await store.enqueue(message, at: Date())
        state.withLock { state in
            // Queued by this process: not on its way until a flush submits it (``SendHandle/cancel()``), and sent again
            // even if an earlier send with this client id was taken back.
            state.sendsQueuedHere.insert(message.clientID)
            state.sendsTakenBack.remove(message.clientID)
            state.link?.signal()
        }
        return SendHandle(clientID: message.clientID, conversation: conversation, client: self)
    }

    /// The outbox row of a message to send, checked as the server would check it.
    private func outgoing(
        _ content: MessageContent,
        to conversation: ConversationID,
        replyTo: MessageID?,
        needsReadReceipt: Bool,
        ext: [String: String]?,
        clientID: ClientMessageID?
    ) throws -> OutgoingMessage {
        if let attachment = content.attachment {
            guard attachment.thumbnailURL?.isFileURL != true else {
                throw CourierError.invalidInput(
                    code: .invalidArgument,
                    message: "thumbnailURL must be where recipients fetch the preview, not a file on this device."
                )
            }
        }
        try Self.check(ext: ext)
        guard content.isValid else {
            throw CourierError.invalidInput(
                code: .invalidArgument,
                message: "A custom type is 1–64 characters of [A-Za-z0-9._:-], starting with a letter, and not a built-in type."
            )
        }
        let body = try content.body()
        _ = try member(of: conversation)
        // The message ends this device's typing on the others' devices; the next keystroke says it anew.
        state.withLock { _ = $0.typingSent.removeValue(forKey: conversation) }
        let limit = state.withLock { $0.limits?.maxBodyBytes } ?? 64 * 1024
        guard body.utf8.count <= limit else { throw CourierError.bodyTooLarge("The body exceeds \(limit) bytes.") }
        let clientID = clientID ?? ClientMessageID(rawValue: UUID().uuidString.lowercased())
        guard clientID.isValid else {
            throw CourierError.invalidInput(
                code: .invalidArgument,
                message: "clientID must be 1–128 of [A-Za-z0-9._@:-]."
            )
        }
        return OutgoingMessage(
            clientID: clientID,
            conversation: conversation,
            type: content.type,
            body: body,
            replyTo: replyTo,
            needsReadReceipt: needsReadReceipt,
            ext: ext?.isEmpty == false ? ext : nil
        )
    }

    /// Pages a conversation's history backwards from the server (fresh), storing what it returns locally.
    ///
    /// Equivalent to NIM `fetchMessageHistory`, Agora `asyncFetchHistoryMessagesFromServer`, RongCloud
    /// `getRemoteHistoryMessages`.
    ///
    /// - Parameters:
    ///   - conversation: The conversation.
    ///   - before: Only messages with a lower seq; the newest when `nil`.
    ///   - limit: At most this many (the server caps it at its `maxPageSize`).
    /// - Returns: Messages in ascending seq order.
    /// - Throws: ``CourierError/notConnected`` when not connected; ``CourierError/notAMember(_:)``.
    public func history(in conversation: ConversationID, before: Seq? = nil, limit: Int = 50) async throws -> [Message]
    {
        try await historyPage(in: conversation, before: before, limit: limit).messages
    }

    /// ``history(in:before:limit:)`` with the lowest seq of the page, notices included (`nil` when empty).
    func historyPage(in conversation: ConversationID, before: Seq?, limit: Int) async throws
        -> (messages: [Message], lowest: Seq?)
    {
        let me = try boundAccount()
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        let request = HistoryRequest(conversation: conversation, before: before, limit: limit)
        guard case .history(let page) = try await link.request({ .history($0, request) }).ack(about: conversation) else {
            throw CourierError.unexpectedReply
        }
        try await store.apply(page.messages, arrival: .roaming, me: me, then: publisher(for: link))
        return (try await messages(page.messages.map(\.id)), page.messages.map(\.seq).min())
    }

    /// - Throws: ``CourierError/invalidInput(code:message:)`` for an `ext` past a message's limits.
    static func check(ext: [String: String]?) throws(CourierError) {
        if let ext, !WireMessage.isValidExt(ext) {
            throw .invalidInput(
                code: .invalidArgument,
                message: "ext holds at most 64 keys of 1–64 characters and \(WireMessage.maxExtBytes) bytes in all."
            )
        }
    }

    /// Sends every queued message, in order, with up to the server's `maxRequestsInFlight` sends under way at once
    /// (pipelining: the server answers them in order and gives seqs in the order sent; ADR 0018). A refusal marks the
    /// message `failed`; a lost connection, or `store.unavailable`, stops the flush (the outbox is retried on the next
    /// connection: sends are idempotent on their client id). A send answered `rate.limited` was not written: the
    /// flush lets the sends under way be answered, waits the `retryAfterMs` the server gave, and goes on from the
    /// oldest message not sent (the server refuses every send until then, so none overtakes another).
    func flushOutbox(on link: Link, me: AccountID) async throws {
        let window = max(1, state.withLock { $0.limits?.maxRequestsInFlight } ?? 1)
        var queued: [OutgoingMessage] = []
        var submitted: Set<ClientMessageID> = []
        var inFlight: [(outgoing: OutgoingMessage, id: RequestID)] = []
        /// How long the server asked to wait, once the sends under way are answered.
        var pause: Duration?
        defer { for request in inFlight { link.abandon(request.id) } }
        while true {
            if inFlight.isEmpty, let wait = pause {
                try await configuration.clock.sleep(for: wait)
                pause = nil
                queued = []
            }
            while inFlight.count < window, pause == nil {
                // Messages queued since the flush began join the window as it opens.
                if queued.isEmpty { queued = try await store.sendableOutbox().filter { !submitted.contains($0.clientID) } }
                guard !queued.isEmpty else { break }
                let outgoing = queued.removeFirst()
                // A file attachment is uploaded beside the connection (``AttachmentUploader``), which goes on with
                // everything else meanwhile; the message is sent by the flush after the upload.
                // Taken back (``SendHandle/cancel()``) after this flush read the outbox: not sent; otherwise it is
                // on its way from here, and no longer to be taken back.
                let claimed = state.withLock { state -> Bool in
                    guard !state.sendsTakenBack.contains(outgoing.clientID) else { return false }
                    if outgoing.pendingUpload == nil { state.sendsOnTheirWay.insert(outgoing.clientID) }
                    return true
                }
                guard claimed else {
                    submitted.insert(outgoing.clientID)
                    continue
                }
                guard outgoing.pendingUpload == nil else {
                    startUpload(of: outgoing)
                    submitted.insert(outgoing.clientID)
                    continue
                }
                let request = SendRequest(
                    conversation: outgoing.conversation,
                    clientID: outgoing.clientID,
                    type: outgoing.type,
                    body: outgoing.body,
                    replyTo: outgoing.replyTo,
                    needsReadReceipt: outgoing.needsReadReceipt ? true : nil,
                    ext: outgoing.ext
                )
                inFlight.append((outgoing, try await link.submit { .send($0, request) }))
                submitted.insert(outgoing.clientID)
            }
            guard !inFlight.isEmpty || pause != nil else { return }
            guard !inFlight.isEmpty else { continue }
            let (outgoing, id) = inFlight.removeFirst()
            // A send stays "on its way" until its answer is handled: stored (its outbox row is gone by then), refused
            // (its row failed), or not written (sent again after a pause). One whose connection was lost may have been
            // stored, and stays on its way.
            let answered = { [state] in _ = state.withLock { $0.sendsOnTheirWay.remove(outgoing.clientID) } }
            switch try await link.reply(to: id) {
            case .success(.send(let ack)):
                try await store.completeSend(
                    outgoing.clientID, with: ack.message, me: me, then: publisher(for: link),
                    stored: { [sendWaiters] message in sendWaiters.resolve(outgoing.clientID, with: .success(message)) }
                )
                answered()
                link.noteLiveTraffic(checkpointAfter: configuration.syncCheckpointInterval)
            case .failure(let wire) where wire.code == .rateLimited:
                // Not written: sent again, in order, after the wait (those under way are answered first).
                answered()
                submitted.remove(outgoing.clientID)
                pause = max(pause ?? .zero, .milliseconds(wire.retryAfterMs ?? 1000))
            case .failure(let wire) where wire.code.isRetriedLater:
                // The server's database cannot be reached: the message stays queued, and the connection starts over
                // after the backoff (a send is idempotent on its client id).
                throw CourierError(wire, conversation: outgoing.conversation)
            case .failure(let wire):
                let error = CourierError(wire, conversation: outgoing.conversation)
                try await store.failSend(outgoing.clientID, with: error)
                answered()
                sendWaiters.resolve(outgoing.clientID, with: .failure(error))
            default:
                throw CourierError.unexpectedReply
            }
        }
    }
}
