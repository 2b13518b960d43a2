// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// Typing indicators (ADR 0050): told to the other members' connected devices, on this node and through the database's
/// notifications on the others, and never stored. Refused for non-members like any request about a conversation;
/// shown to nobody when the account turned its indicators off or the server shows none.
package struct TypingService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    /// `--typing-indicators`: whether the server shows anyone's typing.
    let showsTyping: Bool

    package func typing(_ request: TypingRequest, from device: DeviceContext) async throws(RequestError)
        -> ServiceResult<TypingAck>
    {
        let conversation = request.conversation
        if let (first, second) = conversation.directMembers {
            guard device.account == first || device.account == second else {
                throw ConversationAccess.notAMember(conversation)
            }
        } else if conversation.groupID == nil {
            throw ConversationAccess.invalid(conversation)
        }
        let check = try await storing { () throws(StorageError) in
            try await store.typingCheck(of: device.account, in: conversation)
        }
        if conversation.kind == .group {
            guard check.membershipVersion != nil else { throw ConversationAccess.groupNotFound(conversation) }
            guard check.isMember else { throw ConversationAccess.notAMember(conversation) }
        }
        let expiresInMs = TypingEvent.expiresInMs
        guard showsTyping, check.sendsTypingIndicators else {
            return ServiceResult(ack: TypingAck(shown: false, expiresInMs: expiresInMs))
        }
        let event = TypingEvent(
            conversation: conversation, account: device.account, active: request.active ?? true, expiresInMs: expiresInMs
        )
        let recipients = try await access.typingAudience(of: event, membershipVersion: check.membershipVersion)
        try await storing { () throws(StorageError) in
            try await store.tellOtherNodes(.typing(event, membershipVersion: check.membershipVersion))
        }
        return ServiceResult(
            ack: TypingAck(shown: true, expiresInMs: expiresInMs),
            publications: [Publication(event: .typing(event), recipients: recipients, excluded: nil)]
        )
    }

    /// Reads, and with `sendTypingIndicators` changes, the caller's setting.
    package func settings(_ request: TypingSettingsRequest, from device: DeviceContext) async throws(RequestError)
        -> TypingSettings
    {
        return try await storing { () throws(StorageError) in
            if let value = request.sendTypingIndicators {
                try await store.setSendsTypingIndicators(value, for: device.account)
            }
            return TypingSettings(
                sendTypingIndicators: try await store.sendsTypingIndicators(device.account),
                serverShowsTyping: showsTyping
            )
        }
    }
}
