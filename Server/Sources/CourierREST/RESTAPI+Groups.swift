// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

extension RESTAPI {
    func createGroup(_ input: Operations.CreateGroup.Input) async throws -> Operations.CreateGroup.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let owner = try Self.account(body.owner.rawValue)
        let request = CreateGroupRequest(
            group: GroupID(rawValue: body.group),
            clientID: body.clientId ?? Self.generatedClientID(),
            members: body.members ?? []
        )
        let ack = try await published { () throws(RequestError) in
            try await groups.create(request, from: DeviceContext.app(acting: owner))
        }
        return .created(.init(body: .json(ack)))
    }

    func getGroup(_ input: Operations.GetGroup.Input) async throws -> Operations.GetGroup.Output {
        let conversation = ConversationID.group(GroupID(rawValue: input.path.group))
        let page = try await service { () throws(RequestError) in
            try await groups.members(GroupMembersRequest(conversation: conversation, limit: 1), caller: nil)
        }
        let last = try await storage { try await store.messages(in: conversation, before: nil, limit: 1) }.last
        return .ok(.init(body: .json(.init(
            id: input.path.group,
            conversation: conversation,
            memberCount: page.total,
            lastSeq: last?.seq ?? .zero,
            lastTime: last?.time ?? Timestamp(milliseconds: 0)
        ))))
    }

    func listGroupMembers(
        _ input: Operations.ListGroupMembers.Input
    ) async throws -> Operations.ListGroupMembers.Output {
        let request = GroupMembersRequest(
            conversation: .group(GroupID(rawValue: input.path.group)),
            cursor: input.query.cursor,
            limit: input.query.limit
        )
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await groups.members(request, caller: nil)
        })))
    }

    func changeGroup(_ input: Operations.ChangeGroup.Input) async throws -> Operations.ChangeGroup.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let actor = try Self.account(body.by.rawValue)
        let request = GroupChangeRequest(
            conversation: .group(GroupID(rawValue: input.path.group)),
            clientID: body.clientId ?? Self.generatedClientID(),
            action: GroupChangeRequest.Action(rawValue: body.action.rawValue),
            accounts: body.accounts,
            role: body.role.flatMap { MemberRole(rawValue: $0.rawValue) },
            profile: body.profile
        )
        let ack = try await published { () throws(RequestError) in
            try await groups.change(request, from: DeviceContext.app(acting: actor))
        }
        return .ok(.init(body: .json(ack)))
    }

    func dismissGroup(_ input: Operations.DismissGroup.Input) async throws -> Operations.DismissGroup.Output {
        let group = ConversationID.group(GroupID(rawValue: input.path.group))
        let ack = try await published { () throws(RequestError) in
            try await groups.dismissForApp(group, clientID: Self.generatedClientID())
        }
        return .ok(.init(body: .json(ack)))
    }
}
