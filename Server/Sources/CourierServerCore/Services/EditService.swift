// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation

/// Edits (ADR 0054; Agora `modifyMessage`, Stream `updateMessage`). An edit is an entry appended to the conversation's
/// log — every device learns of it through normal sync — and, in the same transaction, the message's row takes the
/// new body and `ext` and its replies the new quote. Who may edit, within which window and whether the message was
/// recalled is decided by that transaction (``EditPlan``).
package struct EditService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    /// How long after sending a message may be edited by a device.
    let window: Duration
    /// Whether a group's owner and admins edit their members' messages.
    let adminsEdit: Bool
    let limits: CourierServerConfiguration.Limits
    let hooks: CourierServerConfiguration.Hooks
    let now: @Sendable () -> Timestamp

    package func edit(
        _ request: EditRequest,
        from device: DeviceContext) async throws(RequestError
    ) -> ServiceResult<SendAck> {
        try await edit(request, by: device.account, excluding: device.connection, window: window)
    }

    /// The app's backend editing for the app (REST): as the message's sender, with no window unless it gives one.
    package func editForApp(
        _ request: EditRequest,
        window: Duration? = nil) async throws(RequestError
    ) -> ServiceResult<SendAck> {
        try await edit(request, by: nil, excluding: nil, window: window)
    }

    /// - Parameter editor: Who edits; `nil` for the app, which edits as the message's sender.
    private func edit(
        _ request: EditRequest,
        by editor: AccountID?,
        excluding connection: ConnectionID?,
        window: Duration?
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        if let editor { try await access.check(editor, in: request.conversation) }
        let target = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        guard target.isChatMessage else {
            throw RequestError(.messageNotFound, "'\(target.id)' is a notice, not a message: it cannot be edited.")
        }
        // The content as a send checks it, under the editor's client id; the type stays the message's.
        let (_, ext) = try MessageService.checkedContent(
            clientID: request.clientID,
            type: target.type,
            body: request.body,
            ext: request.ext,
            limits: limits
        )
        if editor == nil { try await access.requireConversation(request.conversation) }
        let entry = MessageDraft(
            id: MessageID(rawValue: .randomUUID()),
            conversation: request.conversation,
            clientID: request.clientID,
            sender: editor ?? target.sender,
            time: now(),
            type: target.type,
            body: request.body,
            ext: ext,
            edit: WireEditNotice(
                messageID: target.id,
                sender: target.sender,
                editedBy: editor ?? target.sender,
                byApp: editor == nil ? true : nil
            )
        )
        let rules = EditPlan.Rules(byApp: editor == nil, window: window?.milliseconds, managersEdit: adminsEdit)
        await hooks.beforeWrite?(.edit)
        let result: AppendOutcome
        do {
            result = try await store.edit(entry, rules: rules)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        return try await access.published(result, excluding: connection)
    }
}
