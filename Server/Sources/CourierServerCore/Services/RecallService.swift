// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation

/// Recall (SPEC §6, NIM 消息撤回). A recall is a notice appended to the conversation's log — it has its own seq, so
/// every device learns of it through normal sync — and, in the same transaction, the body is erased.
package struct RecallService: Sendable {
    let store: any CourierStore
    package let access: ConversationAccess
    /// How long after sending its sender may recall a message.
    let window: Duration
    /// How long after sending a group owner or admin may recall someone else's message.
    let adminWindow: Duration
    /// Most UTF-8 bytes of postscript, ext and push fields together (the server's `maxBodyBytes`).
    let maxExtraBytes: Int
    let hooks: CourierServerConfiguration.Hooks
    let now: @Sendable () -> Timestamp
    /// After a two-way recall or a purge committed: deletes the bytes of the files it erased (``MediaService``), so
    /// that the answer means they are gone.
    package var afterErase: @Sendable () async -> Void = {}

    package func recall(
        _ request: RecallRequest,
        from device: DeviceContext
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        try await recall(request, by: device.account, excluding: device.connection, window: window)
    }

    /// The app's backend recalling for the app (REST): as the message's sender, with no window unless it gives one
    /// (SPEC §6: the server API may override the window).
    package func recallForApp(
        _ request: RecallRequest,
        window: Duration? = nil) async throws(RequestError
    ) -> ServiceResult<SendAck> {
        try await recall(request, by: nil, excluding: nil, window: window)
    }

    /// - Parameter requester: Who recalls; `nil` for the app, which recalls as the message's sender.
    private func recall(
        _ request: RecallRequest,
        by requester: AccountID?,
        excluding connection: ConnectionID?,
        window: Duration?
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        if let requester { try await access.check(requester, in: request.conversation) }
        let mode = request.mode ?? .twoWay
        guard mode == .twoWay || mode == .oneWay else {
            throw RequestError(.invalidArgument, "mode must be twoWay or oneWay.")
        }
        try validateExtras(request)
        // What cannot change: which message it is, who sent it, when. Roles, membership and whether it was recalled
        // are read by the recall's own transaction (``RecallPlan``).
        let target = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        guard target.recall == nil, target.edit == nil else {
            throw RequestError(.messageNotFound, "'\(target.id)' is a notice, not a message: recall the message.")
        }
        if requester == nil { try await access.requireConversation(request.conversation) }
        let notice = WireRecallNotice(
            messageID: target.id,
            sender: target.sender,
            recalledBy: requester ?? target.sender,
            mode: mode,
            postscript: request.postscript,
            ext: request.ext,
            pushText: request.pushText,
            pushPayload: request.pushPayload,
            countsAsUnread: request.countsAsUnread ?? false,
            byApp: requester == nil ? true : nil
        )
        let entry = entry(for: notice, in: request.conversation)
        let rules = RecallPlan.Rules(
            byApp: requester == nil,
            window: window?.milliseconds,
            managerWindow: window.map { _ in adminWindow.milliseconds }
        )
        await hooks.beforeWrite?(.recall)
        let result: AppendOutcome
        do {
            result = try await store.recall(entry, rules: rules)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        if mode == .twoWay, !result.isDuplicate { await afterErase() }
        // Every member's devices get the notice (the SDK of a one-way recall's sender keeps its copy).
        return try await access.published(result, excluding: connection)
    }
}

extension RecallService {
    /// Erases up to `limit` messages of `scope` sent before `time`, each as the app's two-way recall erases it, with
    /// no window and no push (ADR 0028); `more` when some remain. Each recall's own transaction decides again whether
    /// its message is still there to erase: one recalled meanwhile is skipped. Each notice is handed to `publish` as
    /// soon as it is stored.
    package func purge(
        _ scope: PurgeScope,
        before time: Timestamp,
        limit: Int,
        publish: ([Publication]) async -> Void
    ) async throws(RequestError) -> (purged: Int, more: Bool) {
        let candidates: [PurgeCandidate]
        do {
            try await store.dropSenderCopies(scope, before: time)
            candidates = try await store.purgeCandidates(scope, before: time, limit: limit + 1)
        } catch {
            throw RequestError(error)
        }
        var purged = 0
        for candidate in candidates.prefix(limit) {
            let notice = WireRecallNotice(
                messageID: candidate.message,
                sender: candidate.sender,
                recalledBy: candidate.sender,
                mode: .twoWay,
                countsAsUnread: false,
                byApp: true
            )
            var entry = entry(for: notice, in: candidate.conversation)
            entry.announcement = .withoutPush
            let result: AppendOutcome
            do {
                result = try await store.recall(entry, rules: RecallPlan.Rules(byApp: true, window: nil, managerWindow: nil))
            } catch .alreadyRecalled {
                continue
            } catch {
                throw RequestError(error)
            }
            if !result.isDuplicate { purged += 1 }
            await publish(try await access.published(result, excluding: nil).publications)
        }
        if purged > 0 { await afterErase() }
        return (purged, candidates.count > limit)
    }

    /// The log entry of `notice`, sent by whoever recalls (its client id names the recalled message: a repeat of
    /// the same recall is a duplicate).
    private func entry(for notice: WireRecallNotice, in conversation: ConversationID) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: .randomUUID()),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: "recall:\(notice.messageID.rawValue)"),
            sender: notice.recalledBy,
            time: now(),
            body: "",
            recall: notice
        )
    }

    /// `ext` and `pushPayload` must be JSON; all the extras together fit in `maxExtraBytes`.
    private func validateExtras(_ request: RecallRequest) throws(RequestError) {
        let extras = [request.postscript, request.ext, request.pushText, request.pushPayload]
        guard extras.reduce(0, { $0 + ($1?.utf8.count ?? 0) }) <= maxExtraBytes else {
            throw RequestError(
                .invalidArgument,
                "postscript, ext, pushText and pushPayload together exceed \(maxExtraBytes) bytes."
            )
        }
        for (name, text) in [("ext", request.ext), ("pushPayload", request.pushPayload)] {
            guard let text else { continue }
            guard (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) != nil else {
                throw RequestError(.invalidArgument, "\(name) must be JSON text.")
            }
        }
    }
}
