// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

extension RESTAPI {
    func sendMessage(_ input: Operations.SendMessage.Input) async throws -> Operations.SendMessage.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        // A deactivated account's devices cannot send; neither can the app as it (read before the send's transaction:
        // a deactivation committing meanwhile may let this one send through, as it may a device's in flight).
        _ = try await activeAccount(body.from.rawValue)
        let request = SendRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            clientID: body.clientId,
            type: body._type,
            body: body.body,
            replyTo: body.replyTo,
            needsReadReceipt: body.needsReadReceipt,
            ext: body.ext?.additionalProperties
        )
        let ack = try await published { () throws(RequestError) in
            try await messages.send(request, from: DeviceContext.app(acting: body.from))
        }
        return .ok(.init(body: .json(ack)))
    }

    func listMessages(_ input: Operations.ListMessages.Input) async throws -> Operations.ListMessages.Output {
        let account = try Self.account(input.query.account)
        _ = try input.query.limit.map { try Self.pageLimit($0) }
        let request = HistoryRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            before: input.query.before.map { Seq($0) },
            limit: input.query.limit
        )
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await messages.history(request, from: DeviceContext.app(acting: account))
        })))
    }

    func getMessage(_ input: Operations.GetMessage.Input) async throws -> Operations.GetMessage.Output {
        let conversation = ConversationID(rawValue: input.path.conversation)
        let id = input.path.messageId
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await MessageLookup.message(id, in: conversation, store: store)
        })))
    }

    func listUndeliveredRecipients(
        _ input: Operations.ListUndeliveredRecipients.Input
    ) async throws -> Operations.ListUndeliveredRecipients.Output {
        let conversation = ConversationID(rawValue: input.path.conversation)
        let id = input.path.messageId
        let message = try await service { () throws(RequestError) in
            try await MessageLookup.message(id, in: conversation, store: store)
        }
        let limit = try Self.pageLimit(input.query.limit)
        let page = try await storage {
            try await store.undeliveredRecipients(
                in: conversation,
                seq: message.seq,
                excluding: WebhookEvents.pushExclusions(for: message),
                after: input.query.cursor.map { AccountID(rawValue: $0) },
                limit: limit + 1
            )
        }
        let shown = Array(page.prefix(limit))
        return .ok(.init(body: .json(.init(
            recipients: shown,
            nextCursor: page.count > limit ? shown.last?.account.rawValue : nil
        ))))
    }
}
