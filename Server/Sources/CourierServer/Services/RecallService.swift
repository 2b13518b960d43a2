// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Foundation

/// Recall (SPEC §6, NIM 消息撤回). A recall is a notice appended to the conversation's log — it has its own seq, so
/// every device learns of it through normal sync — and, in the same transaction, the body is erased.
struct RecallService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    /// How long after sending its sender may recall a message.
    let window: Duration
    /// How long after sending a group owner or admin may recall someone else's message.
    let adminWindow: Duration
    /// Most UTF-8 bytes of postscript, ext and push fields together (the server's `maxBodyBytes`).
    let maxExtraBytes: Int
    let now: @Sendable () -> Timestamp

    func recall(
        _ request: RecallRequest,
        from device: DeviceContext
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        try await recall(request, by: device.account, excluding: device.connection, window: window)
    }

    /// The app's backend recalling for the app (REST): as the message's sender, with no window unless it gives one
    /// (SPEC §6: the server API may override the window).
    func recallForApp(_ request: RecallRequest, window: Duration? = nil) async throws(RequestError) -> ServiceResult<SendAck> {
        try await recall(request, by: nil, excluding: nil, window: window)
    }

    /// - Parameter requester: Who recalls; `nil` for the app, which recalls as the message's sender.
    private func recall(
        _ request: RecallRequest,
        by requester: AccountID?,
        excluding connection: ConnectionID?,
        window: Duration?
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        if let requester { _ = try await access.members(of: request.conversation, caller: requester) }
        let mode = request.mode ?? .twoWay
        guard mode == .twoWay || mode == .oneWay else {
            throw RequestError(.invalidArgument, "mode must be twoWay or oneWay.")
        }
        try validateExtras(request)
        let target = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        guard target.recall == nil else {
            throw RequestError(.messageNotFound, "'\(target.id)' is a recall notice, not a message.")
        }
        let isApp = requester == nil
        let requester = requester ?? target.sender
        let members =
            isApp
            ? try await access.members(of: request.conversation).accounts
            : try await access.members(of: request.conversation, caller: requester)
        var window = window
        if target.sender != requester {
            // Direct conversations: only the sender. Groups: the owner recalls anyone's message, admins ordinary
            // members' messages, each within the admin window.
            guard request.conversation.kind == .group else {
                throw RequestError(
                    .recallNotPermitted,
                    "Only the sender may recall a message in a direct conversation."
                )
            }
            let role = try await access.member(of: request.conversation, caller: requester).role
            // A sender who left counts as an ordinary member.
            let senderRole: MemberRole
            do {
                senderRole = try await store.member(target.sender, of: request.conversation)?.role ?? .member
            } catch {
                throw RequestError(error)
            }
            guard GroupRules.canManage(role, senderRole) else {
                throw RequestError(
                    .recallNotPermitted,
                    "In a group the owner may recall anyone's message and admins ordinary members' messages."
                )
            }
            window = window.map { _ in adminWindow }
        }
        let time = now()
        // A repeat by the same requester is answered from the log, whatever the time; otherwise the window applies.
        if let window, !target.isRecalled, time.rawValue - target.time.rawValue > window.milliseconds {
            throw RequestError(
                .recallWindowExpired,
                "Messages can be recalled within \(window.milliseconds / 1000) s of sending."
            )
        }
        let notice = WireRecallNotice(
            messageID: target.id,
            sender: target.sender,
            recalledBy: requester,
            mode: mode,
            postscript: request.postscript,
            ext: request.ext,
            pushText: request.pushText,
            pushPayload: request.pushPayload,
            countsAsUnread: request.countsAsUnread ?? false
        )
        let entry = MessageDraft(
            id: MessageID(rawValue: UUID().uuidString.lowercased()),
            conversation: request.conversation,
            clientID: ClientMessageID(rawValue: "recall:\(target.id.rawValue)"),
            sender: requester,
            time: time,
            body: "",
            recall: notice
        )
        let result: AppendResult
        do { result = try await store.recall(entry) } catch { throw RequestError(error) }
        var reply = ServiceResult(ack: SendAck(message: result.message, duplicate: result.isDuplicate))
        if !result.isDuplicate {
            // Every member's devices get the notice (the SDK of a one-way recall's sender keeps its copy).
            let event = ServerEvent.message(MessageEvent(message: result.message))
            reply.publications = [Publication(event: event, recipients: members, excluded: connection)]
        }
        return reply
    }
}

extension RecallService {
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

extension Duration {
    /// The duration in whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
