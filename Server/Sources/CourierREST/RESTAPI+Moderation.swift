// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

/// Lists to find things by, connected devices across nodes, and purges (ADR 0027 and 0028).
extension RESTAPI {
    func listConversations(
        _ input: Operations.ListConversations.Input
    ) async throws -> Operations.ListConversations.Output {
        let limit = try Self.pageLimit(input.query.limit)
        let filter = ConversationFilter(
            member: try input.query.member.map(Self.account),
            kind: input.query.kind.map { $0 == .group ? .group : .direct },
            prefix: input.query.prefix
        )
        let cursor = input.query.cursor.map(ConversationID.init(rawValue:))
        let page = try await storage { try await store.conversations(filter, after: cursor, limit: limit + 1) }
        let shown = page.prefix(limit)
        return .ok(.init(body: .json(.init(
            conversations: shown.map {
                .init(
                    id: $0.id,
                    kind: $0.kind == .group ? .group : .direct,
                    memberCount: $0.memberCount,
                    lastSeq: $0.lastSeq,
                    lastTime: $0.lastTime
                )
            },
            nextCursor: page.count > limit ? shown.last?.id.rawValue : nil
        ))))
    }

    func listGroups(_ input: Operations.ListGroups.Input) async throws -> Operations.ListGroups.Output {
        let limit = try Self.pageLimit(input.query.limit)
        // Group ids are account-shaped (1–128 of [A-Za-z0-9._@-]).
        let prefix = try input.query.prefix.map { "g:" + (try Self.account($0).rawValue) } ?? "g:"
        let cursor = try input.query.cursor.map { ConversationID.group(GroupID(rawValue: try Self.account($0).rawValue)) }
        let page = try await storage {
            try await store.conversations(ConversationFilter(kind: .group, prefix: prefix), after: cursor, limit: limit + 1)
        }
        let shown = page.prefix(limit)
        return .ok(.init(body: .json(.init(
            groups: shown.map {
                .init(
                    id: $0.id.groupID?.rawValue ?? $0.id.rawValue,
                    conversation: $0.id,
                    memberCount: $0.memberCount,
                    lastSeq: $0.lastSeq,
                    lastTime: $0.lastTime
                )
            },
            nextCursor: page.count > limit ? shown.last?.id.groupID?.rawValue : nil
        ))))
    }

    func listDevices(_ input: Operations.ListDevices.Input) async throws -> Operations.ListDevices.Output {
        let account = try await existingAccount(input.path.account)
        let devices =
            if let presence = registry.presence {
                try await storage { try await presence.store.connectedDevices(of: account) }
            } else {
                registry.devices(of: account)
            }
        return .ok(.init(body: .json(.init(
            devices: devices.map { .init(device: $0.device.rawValue, connectedAt: $0.connectedAt, node: $0.node) }
        ))))
    }

    func purgeAccountMessages(
        _ input: Operations.PurgeAccountMessages.Input
    ) async throws -> Operations.PurgeAccountMessages.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(try await purge(.account(account), body))))
    }

    func purgeConversationMessages(
        _ input: Operations.PurgeConversationMessages.Input
    ) async throws -> Operations.PurgeConversationMessages.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let conversation = ConversationID(rawValue: input.path.conversation)
        try await service { () throws(RequestError) in
            guard conversation.kind != nil else { throw ConversationAccess.invalid(conversation) }
            try await recalls.access.requireConversation(conversation)
        }
        return .ok(.init(body: .json(try await purge(.conversation(conversation), body))))
    }

    private func purge(
        _ scope: PurgeScope,
        _ body: Components.Schemas.PurgeBody
    ) async throws -> Components.Schemas.PurgeResult {
        let limit = try Self.pageLimit(body.limit, default: 1000)
        let (purged, more) = try await service { () throws(RequestError) in
            try await recalls.purge(scope, before: body.before, limit: limit) { await publish($0) }
        }
        return .init(purged: purged, more: more)
    }

    /// A page size: 1–1000, `default` when not given.
    static func pageLimit(_ limit: Int?, default: Int = 100) throws -> Int {
        let limit = limit ?? `default`
        guard (1...1000).contains(limit) else { throw HTTPRequestError(.invalidArgument, "limit must be 1–1000.") }
        return limit
    }
}
