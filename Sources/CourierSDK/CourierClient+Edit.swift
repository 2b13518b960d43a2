// Courier — Apache-2.0
internal import Foundation
public import CourierWire

extension CourierClient {
    /// Edits a message: replaces its body and `ext` for every member (Agora `modifyMessage`, Stream `updateMessage`;
    /// NIM and RongCloud have no equivalent on the device).
    ///
    /// The edit is an entry in the conversation's log (ADR 0054), so every device learns of it — live, or when it next
    /// connects — and rewrites its copy (``CourierEvent/messageEdited(_:)``); history shows the latest text with
    /// ``Message/editedAt``, and replies quote the new text. The message keeps its type: send an image's new JSON to
    /// change its caption, text to change a text.
    ///
    /// Only the sender edits, within the server's edit window (a day by default; see ``editDeadline(for:)``);
    /// in a group the owner and admins edit their members' messages where the server allows it.
    ///
    /// - Parameters:
    ///   - message: The message's server id.
    ///   - conversation: Its conversation.
    ///   - body: The new body (for text, the text; see ``MessageContent``).
    ///   - ext: The new key-values; `nil` removes those it had (an edit replaces `ext` as a whole).
    ///   - clientID: The edit's idempotency key (one is made when `nil`): a retry with the same one is answered with the
    ///     stored edit.
    /// - Returns: The message as it is now on this device; `nil` when this device does not hold it (an old message
    ///   never paged in): the edit is stored all the same.
    /// - Throws: ``CourierError/editRefused(code:message:)`` with `edit.notPermitted`, `edit.windowExpired` or
    ///   `edit.recalled`; ``CourierError/messageNotFound(_:)`` (also for a notice); ``CourierError/bodyTooLarge(_:)``;
    ///   ``CourierError/notConnected``: an edit needs a connection (it is checked against the window when the
    ///   server receives it, so it is not queued).
    @discardableResult
    public func edit(
        _ message: MessageID,
        in conversation: ConversationID,
        body: String,
        ext: [String: String]? = nil,
        clientID: ClientMessageID? = nil
    ) async throws -> Message? {
        let clientID = clientID ?? ClientMessageID(rawValue: "edit:" + UUID().uuidString.lowercased())
        let me = try member(of: conversation)
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        let request = EditRequest(conversation: conversation, messageID: message, clientID: clientID, body: body, ext: ext)
        guard case .edit(let ack) = try await link.request({ .edit($0, request) }).ack(about: conversation),
            ack.message.edit != nil
        else { throw CourierError.unexpectedReply }
        try await store.apply([ack.message], arrival: .online, me: me, then: publisher(for: link))
        return try await store.message(message, me: me)
    }
}
