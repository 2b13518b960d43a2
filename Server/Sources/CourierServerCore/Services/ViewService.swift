// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// An account's own view of its conversations (ADR 0029): delete for me, clear for me, mute, pin. Synced to the
/// account's devices (the `view` event now, the conversation state's `view` in `sync` later); nobody else learns of
/// it, and no webhook reports it.
package struct ViewService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let hooks: CourierServerConfiguration.Hooks
    let now: @Sendable () -> Timestamp

    package func change(
        _ request: ChangeViewRequest,
        from device: DeviceContext
    ) async throws(RequestError) -> ServiceResult<ViewEvent> {
        try await access.check(device.account, in: request.conversation)
        let deleted = request.deleteMessageIds ?? []
        guard !deleted.isEmpty || request.clear == true || request.muted != nil || request.pinned != nil
            || request.hidden != nil
        else {
            throw RequestError(.invalidArgument, "changeView names nothing to change.")
        }
        guard deleted.count <= ChangeViewRequest.maxDeletedMessages else {
            throw RequestError(
                .invalidArgument,
                "deleteMessageIds names at most \(ChangeViewRequest.maxDeletedMessages) messages."
            )
        }
        var write = ViewWrite(account: device.account, conversation: request.conversation, now: now())
        // A message's seq never changes: it is looked up before the transaction, which checks membership again.
        for id in Set(deleted) {
            write.deleteSeqs.append(try await MessageLookup.message(id, in: request.conversation, store: store).seq)
        }
        write.clear = request.clear == true
        write.muted = request.muted
        write.pinned = request.pinned
        write.hidden = request.hidden
        await hooks.beforeWrite?(.changeView)
        let changed = try await storing { () throws(StorageError) in try await store.changeView(write) }
        // No longer a member when the transaction ran (removed meanwhile): nothing was written.
        guard let changed, case .viewChanged(_, _, let view) = changed else {
            throw ConversationAccess.notAMember(request.conversation)
        }
        return ServiceResult(
            ack: ViewEvent(conversation: request.conversation, view: view),
            publications: try await access.publications(of: [changed], excluding: device.connection)
        )
    }
}
