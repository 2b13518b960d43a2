// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation

/// Reactions (ADR 0055; Agora `addReaction`, NIM quick comments, Stream `sendReaction`): rows of their message, told to
/// the members' connected devices as `reaction` events with the message's counts, asked for by the messages a device
/// shows (`reactions`) and listed page by page (`reactionList`).
package struct ReactionService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let hooks: CourierServerConfiguration.Hooks
    let now: @Sendable () -> Timestamp

    /// The most entries of one `reactionList` page.
    static let maxPage = 100

    package func react(_ request: ReactRequest, from device: DeviceContext) async throws(RequestError)
        -> ServiceResult<WireReactions>
    {
        try await react(request, as: device.account, excluding: device.connection)
    }

    /// `account` adds or removes a reaction: a device's own request, or the app's backend in its name (REST).
    package func react(_ request: ReactRequest, as account: AccountID, excluding connection: ConnectionID?)
        async throws(RequestError) -> ServiceResult<WireReactions>
    {
        guard ReactRequest.isValid(request.reaction) else {
            throw RequestError(
                .invalidArgument,
                "reaction must be 1–\(ReactRequest.maxReactionBytes) UTF-8 bytes without control characters."
            )
        }
        try await access.check(account, in: request.conversation)
        let target = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        guard target.isChatMessage else {
            throw RequestError(.messageNotFound, "'\(target.id)' is a notice, not a message: it takes no reactions.")
        }
        let write = ReactionWrite(
            conversation: request.conversation,
            message: request.messageID,
            account: account,
            reaction: request.reaction,
            add: request.remove != true,
            time: now()
        )
        await hooks.beforeWrite?(.react)
        let outcome: ReactionOutcome
        do { outcome = try await store.react(write) } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        let publications = try await access.publications(of: outcome.change, excluding: connection)
        return ServiceResult(ack: outcome.reactions, publications: publications)
    }

    package func reactions(
        _ request: ReactionsRequest,
        from device: DeviceContext) async throws(RequestError
    ) -> ReactionsAck {
        guard (1...ReactionsRequest.maxMessages).contains(request.messageIDs.count) else {
            throw RequestError(.invalidArgument, "reactions names 1 to \(ReactionsRequest.maxMessages) messages.")
        }
        try await access.check(device.account, in: request.conversation)
        return try await storing { () throws(StorageError) in
            return ReactionsAck(
                messages: try await store.reactions(
                    of: request.messageIDs,
                    in: request.conversation,
                    viewer: device.account
                )
            )
        }
    }

    package func list(
        _ request: ReactionListRequest,
        from device: DeviceContext?) async throws(RequestError
    ) -> ReactionListAck {
        let limit = request.limit ?? Self.maxPage
        guard (1...Self.maxPage).contains(limit) else {
            throw RequestError(.invalidArgument, "limit is 1 to \(Self.maxPage).")
        }
        if let device { try await access.check(device.account, in: request.conversation) }
        _ = try await MessageLookup.message(request.messageID, in: request.conversation, store: store)
        var position: ReactionPosition?
        if let cursor = request.cursor, !cursor.isEmpty {
            guard let decoded = Self.position(cursor) else {
                throw RequestError(.invalidArgument, "cursor is not one this server handed out.")
            }
            position = decoded
        }
        let entries: [ReactionListEntry]
        do {
            entries = try await store.reactionList(
                of: request.messageID,
                reaction: request.reaction,
                after: position,
                limit: limit + 1
            )
        } catch {
            throw RequestError(error)
        }
        let page = Array(entries.prefix(limit))
        let next = entries.count > limit ? page.last.map { Self.cursor(after: $0) } : nil
        return ReactionListAck(messageID: request.messageID, entries: page, nextCursor: next)
    }

    /// A page's cursor: its last entry's reaction and account, base64url of their UTF-8 with a NUL between.
    package static func cursor(after entry: ReactionListEntry) -> String {
        Data((entry.reaction + "\u{0}" + entry.account.rawValue).utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    package static func position(_ cursor: String) -> ReactionPosition? {
        var text = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), let decoded = String(data: data, encoding: .utf8) else { return nil }
        let parts = decoded.split(separator: "\u{0}", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return ReactionPosition(reaction: String(parts[0]), account: AccountID(rawValue: String(parts[1])))
    }
}
