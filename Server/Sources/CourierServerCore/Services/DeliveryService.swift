// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire

/// Delivery receipts: a per (conversation, account) watermark that only moves forward.
package struct DeliveryService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let now: @Sendable () -> Timestamp

    package func deliver(
        _ request: DeliverRequest,
        from device: DeviceContext
    ) async throws(RequestError)
        -> ServiceResult<DeliverAck>
    {
        try await access.check(device.account, in: request.conversation)
        let seq = try await resolveSeq(request)
        let outcome: DeliveryOutcome
        let time = now()
        do {
            outcome = try await store.advanceDelivered(device.account, in: request.conversation, to: seq, at: time)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        let ack = DeliverAck(conversation: request.conversation, watermark: outcome.watermark)
        return ServiceResult(
            ack: ack,
            publications: try await access.publications(of: outcome.change, excluding: nil)
        )
    }

    /// The seq a receipt names, directly or through a message id of the same conversation.
    private func resolveSeq(_ request: DeliverRequest) async throws(RequestError) -> Seq {
        switch (request.seq, request.messageID) {
        case (let seq?, nil):
            guard seq >= .zero else { throw RequestError(.invalidArgument, "seq must be >= 0.") }
            return seq
        case (nil, let id?):
            return try await MessageLookup.message(id, in: request.conversation, store: store).seq
        default:
            throw RequestError(.invalidArgument, "Give exactly one of seq and messageId.")
        }
    }
}

/// Finds a message a request names by id, in the conversation the request names.
package enum MessageLookup {
    /// - Throws: `message.notFound`, or `message.notInConversation` when it belongs to another conversation.
    package static func message(
        _ id: MessageID,
        in conversation: ConversationID,
        store: any CourierStore
    ) async throws(RequestError) -> WireMessage {
        let message = try await storing { () throws(StorageError) in try await store.message(id) }
        guard let message else {
            throw RequestError(.messageNotFound, "No message has id '\(id.rawValue.prefix(200))'.")
        }
        guard message.conversation == conversation else {
            throw RequestError(.messageNotInConversation, "Message '\(id)' is not in conversation '\(conversation)'.")
        }
        return message
    }
}
