// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

extension RESTAPI {
    func listReceipts(_ input: Operations.ListReceipts.Input) async throws -> Operations.ListReceipts.Output {
        let request = ReceiptListRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageID: input.path.messageId,
            list: ReceiptListKind(rawValue: input.path.list.rawValue),
            accounts: input.query.accounts?.map { AccountID(rawValue: $0) },
            cursor: input.query.cursor,
            limit: input.query.limit
        )
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await groups.list(request, caller: nil)
        })))
    }

    func receiptCounts(_ input: Operations.ReceiptCounts.Input) async throws -> Operations.ReceiptCounts.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let request = ReceiptCountsRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            messageIDs: body.messageIds
        )
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await groups.counts(request, caller: nil)
        })))
    }

    func getDirectReceipts(
        _ input: Operations.GetDirectReceipts.Input
    ) async throws -> Operations.GetDirectReceipts.Output {
        let conversation = ConversationID(rawValue: input.path.conversation)
        guard conversation.kind == .direct, conversation.directMembers != nil else {
            throw HTTPRequestError(RequestError(
                .conversationInvalid,
                "A group's receipts are per message: GET …/messages/{messageId}/receipts/{list}."
            ))
        }
        guard let state = try await storage({ try await store.conversation(conversation) }) else {
            throw HTTPRequestError(RequestError(.conversationNotFound, "Conversation '\(conversation)' has no messages."))
        }
        func watermark(_ mark: Watermark) -> Components.Schemas.Watermark { .init(seq: mark.seq, time: mark.time) }
        return .ok(.init(body: .json(.init(
            conversation: conversation.rawValue,
            lastSeq: state.lastSeq,
            members: state.receipts.map {
                .init(account: $0.account, delivered: watermark($0.delivered), read: watermark($0.read), readSeqs: $0.readSeqs)
            }
        ))))
    }

    func readForMembers(_ input: Operations.ReadForMembers.Input) async throws -> Operations.ReadForMembers.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let request = AppReadRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            accounts: body.accounts,
            seq: body.seq
        )
        let publications = try await service { () throws(RequestError) in try await reads.readForApp(request) }
        await publish(publications)
        return .noContent(.init())
    }
}
