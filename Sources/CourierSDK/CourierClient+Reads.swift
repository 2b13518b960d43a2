// Courier — Apache-2.0
internal import Foundation
internal import Logging
public import CourierWire

extension CourierClient {
    /// Marks one message you received as read (a message read ack): exactly this one, never others, whichever is the
    /// conversation's newest — e.g. a voice message played later, while the text after it was read as it arrived.
    /// To read everything up to a message, use ``markRead(upTo:in:privately:)-(MessageID,_,_)``.
    ///
    /// The read applies on this device at once — the unread count drops and the message becomes
    /// ``Message/isReadAcked`` — and the ack is queued for the server, batched with other acks of the conversation.
    /// When connected, the call returns once the server has it; offline, it returns at once and the ack is sent on
    /// the next connection. A message already read (on any of your devices) is not acked again; your own messages
    /// are never unread.
    ///
    /// Equivalent to Agora `sendMessageReadAck`. (NIM's `sendMessageReceipt:` marks everything up to the message
    /// read: that is ``markRead(upTo:in:privately:)-(MessageID,_,_)``.)
    ///
    /// - Parameters:
    ///   - message: A message stored on this device.
    ///   - conversation: Its conversation.
    ///   - privately: Clear your own unread state (on all your devices) without telling the sender.
    /// - Throws: ``CourierError/messageNotFound(_:)`` when the message is not stored here; `message.notInConversation`;
    ///   ``CourierError/notAMember(_:)``; `receipt.fixedByPolicy` for a private read when the server shares every read.
    public func markRead(_ message: MessageID, in conversation: ConversationID, privately: Bool = false) async throws {
        try await markRead([message], in: conversation, privately: privately)
    }

    /// Marks several messages of one conversation as read, in one batched ack (NIM `sendTeamMessageReceipts:`,
    /// RongCloud `sendReadReceiptResponse`, Agora `sendGroupMessageReadAck` for each).
    public func markRead(
        _ messages: [MessageID],
        in conversation: ConversationID,
        privately: Bool = false
    )
        async throws
    {
        try await applyRead(.messages(messages), in: conversation, privately: privately)
    }

    /// Acknowledges group messages that asked for read receipts with a short note the sender sees next to your
    /// name (Agora `sendGroupMessageReadAck(_:groupId:content:)`): in its ``CourierEvent/groupReadReceiptsChanged(_:)``
    /// event and in ``readReceiptList(for:in:list:accounts:cursor:limit:)``.
    ///
    /// - Parameters:
    ///   - messages: Messages of the group stored on this device.
    ///   - conversation: The group.
    ///   - content: At most 256 bytes of UTF-8. It is kept with the messages this ack newly marks read; a message
    ///     you had already read keeps its first ack (and its note).
    /// - Throws: as ``markRead(_:in:privately:)-(MessageID,_,_)``; `request.invalidArgument` for content over 256 bytes.
    public func markRead(_ messages: [MessageID], in conversation: ConversationID, content: String) async throws {
        guard content.utf8.count <= 256 else {
            throw CourierError.invalidInput(
                code: .invalidArgument,
                message: "An ack's content is at most 256 bytes of UTF-8 (this one is \(content.utf8.count))."
            )
        }
        try await applyRead(.messages(messages, content: content), in: conversation, privately: false)
    }

    /// Marks everything in the conversation read, up to the newest message this device has (a conversation read
    /// ack). Your other devices clear the conversation's unread count too and get ``CourierEvent/conversationRead(_:)``.
    ///
    /// Equivalent to Agora `ackConversationRead`, NIM `markAllMessagesReadInSession`, RongCloud
    /// `clearMessagesUnreadStatus` + `sendReadReceiptMessage`.
    public func markConversationRead(_ conversation: ConversationID, privately: Bool = false) async throws {
        try await applyRead(.conversation, in: conversation, privately: privately)
    }

    /// Marks every message up to `message` read, `message` included: your reading position moves there (the
    /// conversation's unread count drops to what is newer), as NIM's `sendMessageReceipt:` with the last message you
    /// saw. Pass the newest message on screen.
    ///
    /// - Throws: ``CourierError/messageNotFound(_:)`` when the message is not stored here; `message.notInConversation`;
    ///   as ``markRead(_:in:privately:)-(MessageID,_,_)``.
    public func markRead(upTo message: MessageID, in conversation: ConversationID, privately: Bool = false) async throws {
        try await applyRead(.upToMessage(message), in: conversation, privately: privately)
    }

    /// Reads up to a chat screen's row and the notices right after it (``ChatModel/markVisibleRead(_:)``): a recall
    /// notice that counts as unread has no row of its own, and would otherwise stay unread for good.
    func markRowRead(_ message: MessageID, in conversation: ConversationID) async throws {
        try await applyRead(.upToRow(message), in: conversation, privately: false)
    }

    /// Marks every message with `time <= time` read (a read-up-to-time ack), e.g. with the time of the newest
    /// message on screen.
    ///
    /// Equivalent to RongCloud `sendReadReceiptMessage(_:targetId:time:)`, NIM's receipt timestamp.
    public func markRead(upTo time: Timestamp, in conversation: ConversationID, privately: Bool = false) async throws {
        try await applyRead(.upToTime(time), in: conversation, privately: privately)
    }

    /// The unread count of one conversation, from the local store (works offline).
    public func unreadCount(in conversation: ConversationID) async throws -> Int {
        _ = try boundAccount()
        return try await store.unreadCount(in: conversation)
    }

    /// The unread count across every conversation, from the local store (NIM `allUnreadCount`, Agora
    /// `getUnreadMessageCount`).
    ///
    /// - Parameter includingMuted: `false` leaves out the conversations you muted (on any of your devices), as an
    ///   app's badge usually does.
    public func totalUnreadCount(includingMuted: Bool = true) async throws -> Int {
        _ = try boundAccount()
        return try await store.totalUnreadCount(includingMuted: includingMuted)
    }

    /// Your read-receipt settings on the server, and the server's policy.
    ///
    /// - Throws: ``CourierError/notConnected`` when not connected.
    public func readReceiptSettings() async throws -> ReadReceiptSettings {
        try await requestReadReceiptSettings(ReadReceiptSettingsRequest())
    }

    /// Turns sharing your reads with peers on or off: everywhere, or in one conversation (which then overrides
    /// the account-wide setting). With it off, your reads still clear your own unread counts on all your devices.
    ///
    /// Equivalent to Telegram-style "read receipts off" (Agora's `enableRequireReadAck` is the sender's switch for
    /// receiving read acks, not the reader's privacy; none of the three vendors has a reader's switch).
    ///
    /// - Throws: `receipt.fixedByPolicy` when the server's policy decides for everyone;
    ///   ``CourierError/notConnected`` when not connected.
    @discardableResult
    public func setSendsReadReceipts(
        _ enabled: Bool,
        in conversation: ConversationID? = nil
    ) async throws
        -> ReadReceiptSettings
    {
        try await requestReadReceiptSettings(
            ReadReceiptSettingsRequest(conversation: conversation, sendReadReceipts: enabled)
        )
    }

    private func requestReadReceiptSettings(
        _ request: ReadReceiptSettingsRequest
    ) async throws
        -> ReadReceiptSettings
    {
        let ack = try await requestAck(about: request.conversation) { .readReceiptSettings($0, request) }
        guard case .readReceiptSettings(let settings) = ack else { throw CourierError.unexpectedReply }
        return settings
    }

    private func applyRead(_ target: LocalReadTarget, in conversation: ConversationID, privately: Bool) async throws {
        let me = try member(of: conversation)
        if privately, state.withLock({ $0.readReceiptPolicy }) == .alwaysOn {
            throw CourierError.invalidInput(
                code: .receiptFixedByPolicy,
                message: "This server shares every read: private reads are not allowed."
            )
        }
        let link = state.withLock { $0.link }
        let token = UUID().uuidString
        readWaiters.register(token)
        let queued = try await store.markRead(
            target,
            in: conversation,
            isPrivate: privately,
            token: token,
            me: me,
            then: publisher(for: link)
        )
        guard queued, let link else {
            readWaiters.cancel(token)
            return
        }
        link.signal()
        try await readWaiters.wait(for: token, timeout: configuration.requestTimeout, clock: configuration.clock)
    }

    /// Sends the queued read acks, oldest first. A refused ack is dropped (retrying cannot succeed) and its caller,
    /// if still waiting, gets the error; a lost connection, or `store.unavailable`, keeps the rest queued for the next
    /// one; `rate.limited` is waited out (its `retryAfterMs`) and the ack sent again.
    func flushReads(on link: Link, me: AccountID) async throws {
        for queued in try await store.queuedReads() {
            var reply = try await link.request { .read($0, queued.request) }
            // Refused for the device's rate: not written; asked again once the server said it may.
            while case .failure(let error) = reply, error.code == .rateLimited {
                try await configuration.clock.sleep(for: .milliseconds(error.retryAfterMs ?? 1000))
                reply = try await link.request { .read($0, queued.request) }
            }
            switch reply {
            case .success(.read(let state)):
                let done = try await store.completeReads(queued.rowIDs, with: state, me: me, then: publisher(for: link))
                for token in done { readWaiters.resolve(token, with: .success(())) }
            case .failure(let error) where error.code.isRetriedLater:
                throw CourierError(error, conversation: queued.request.conversation)
            case .failure(let error):
                configuration.logger.info("Read receipt refused", metadata: ["courier.error": "\(error.code)"])
                let done = try await store.completeReads(queued.rowIDs, with: nil, me: me, then: publisher(for: link))
                let failure = CourierError(error, conversation: queued.request.conversation)
                for token in done { readWaiters.resolve(token, with: .failure(failure)) }
            default:
                throw CourierError.unexpectedReply
            }
        }
    }
}
