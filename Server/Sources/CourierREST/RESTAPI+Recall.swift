// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

extension RESTAPI {
    func recallMessage(_ input: Operations.RecallMessage.Input) async throws -> Operations.RecallMessage.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let recall = RecallRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageID: body.messageId,
            mode: body.mode,
            postscript: body.postscript,
            ext: body.ext,
            pushText: body.pushText,
            pushPayload: body.pushPayload,
            countsAsUnread: body.countsAsUnread
        )
        let window = try Self.window(body.windowSeconds)
        let ack = try await published { () throws(RequestError) in try await recalls.recallForApp(recall, window: window) }
        return .ok(.init(body: .json(ack)))
    }
}

extension RESTAPI {
    func editMessage(_ input: Operations.EditMessage.Input) async throws -> Operations.EditMessage.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let edit = EditRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageID: body.messageId,
            clientID: body.clientId,
            body: body.body,
            ext: body.ext?.additionalProperties
        )
        let window = try Self.window(body.windowSeconds)
        let ack = try await published { () throws(RequestError) in try await edits.editForApp(edit, window: window) }
        return .ok(.init(body: .json(ack)))
    }
}

extension RESTAPI {
    func reactForAccount(_ input: Operations.ReactForAccount.Input) async throws -> Operations.ReactForAccount.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let request = ReactRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageID: body.messageId,
            reaction: body.reaction,
            remove: body.remove
        )
        let ack = try await published { () throws(RequestError) in
            try await reactions.react(request, as: body.account, excluding: nil)
        }
        return .ok(.init(body: .json(ack)))
    }

    func listReactions(_ input: Operations.ListReactions.Input) async throws -> Operations.ListReactions.Output {
        let request = ReactionListRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageID: input.path.messageId,
            reaction: input.query.reaction,
            cursor: input.query.cursor,
            limit: input.query.limit
        )
        let page = try await service { () throws(RequestError) in try await reactions.list(request, from: nil) }
        return .ok(.init(body: .json(page)))
    }
}

extension RESTAPI {
    /// A recall's or an edit's own window (`windowSeconds`) in place of the server's: at most a year.
    static func window(_ seconds: Int?) throws(HTTPRequestError) -> Duration? {
        if let seconds, !(0...31_536_000).contains(seconds) {
            throw HTTPRequestError(.invalidArgument, "windowSeconds must be 0–31,536,000 (a year).")
        }
        return seconds.map { Duration.seconds($0) }
    }
}
