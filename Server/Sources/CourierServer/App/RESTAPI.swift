// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime

/// The REST API for the app's backend, as `Server/Sources/CourierAPI/openapi.yaml` declares it: the generated
/// `APIProtocol` makes a handler that drifts from the document fail to compile. Every operation acting for an
/// account runs through the same service, with the same checks, as that account's own wire request; events go out
/// after the answer is decided, as on the wire. Errors are thrown as `HTTPRequestError` and become problems in
/// `CodedErrorMiddleware`.
struct RESTAPI: APIProtocol {
    let store: any CourierStore
    let messages: MessageService
    let groups: GroupService
    let reads: ReadService
    let recalls: RecallService
    let registry: ConnectionRegistry
    let tokens: TokenAuthority
    let bus: any EventBus
    let webhooks: CourierServerConfiguration.Webhooks
    let dispatcher: WebhookDispatcher
    let settings: [(name: String, value: String)]
    let now: @Sendable () -> Timestamp

    /// Most accounts in one bulk registration.
    static let maxAccounts = 1000

    // MARK: Accounts

    func registerAccounts(_ input: Operations.RegisterAccounts.Input) async throws -> Operations.RegisterAccounts.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        guard (1...Self.maxAccounts).contains(body.accounts.count) else {
            throw HTTPRequestError(.invalidArgument, "Name 1–\(Self.maxAccounts) accounts per request.")
        }
        if let bad = body.accounts.first(where: { !$0.isValid }) {
            throw HTTPRequestError(
                .invalidArgument,
                "'\(bad.rawValue.prefix(200))' is not an account id (1–128 characters of [A-Za-z0-9._@-])."
            )
        }
        try await storage { try await store.registerAccounts(body.accounts, at: now()) }
        return .noContent(.init())
    }

    func registerAccount(_ input: Operations.RegisterAccount.Input) async throws -> Operations.RegisterAccount.Output {
        let account = try Self.account(input.path.account)
        try await storage { try await store.registerAccount(account, at: now()) }
        return .noContent(.init())
    }

    func getAccount(_ input: Operations.GetAccount.Input) async throws -> Operations.GetAccount.Output {
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(.init(id: account, devicesOnline: registry.connectionCount(of: account)))))
    }

    func createToken(_ input: Operations.CreateToken.Input) async throws -> Operations.CreateToken.Output {
        let account = try await existingAccount(input.path.account)
        var ttl: Int64 = 30 * 86_400
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        if let requested = body.ttlSeconds {
            guard (60...31_536_000).contains(requested) else {
                throw HTTPRequestError(.invalidArgument, "ttlSeconds must be 60–31,536,000 (one year).")
            }
            ttl = requested
        }
        if let maxLifetime = tokens.maxLifetime, Double(ttl) > maxLifetime {
            throw HTTPRequestError(
                .invalidArgument,
                "ttlSeconds exceeds this server's maximum token lifetime (\(Int(maxLifetime)) s)."
            )
        }
        let issued = Date()
        let token = try await tokens.token(for: account, lifetime: .seconds(ttl), issuedAt: issued)
        let expiresAt = Timestamp(milliseconds: Int64((issued.timeIntervalSince1970 + Double(ttl)) * 1000))
        return .created(.init(body: .json(.init(token: token, expiresAt: expiresAt))))
    }

    func getUnread(_ input: Operations.GetUnread.Input) async throws -> Operations.GetUnread.Output {
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await reads.unread(from: DeviceContext.app(acting: account))
        })))
    }

    func getReadReceiptSettings(
        _ input: Operations.GetReadReceiptSettings.Input
    ) async throws -> Operations.GetReadReceiptSettings.Output {
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await reads.settings(ReadReceiptSettingsRequest(), from: DeviceContext.app(acting: account))
        })))
    }

    func setReadReceiptSettings(
        _ input: Operations.SetReadReceiptSettings.Input
    ) async throws -> Operations.SetReadReceiptSettings.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let account = try await existingAccount(input.path.account)
        let request = ReadReceiptSettingsRequest(conversation: body.conversation, sendReadReceipts: body.sendReadReceipts)
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await reads.settings(request, from: DeviceContext.app(acting: account))
        })))
    }

    func listPushTokens(_ input: Operations.ListPushTokens.Input) async throws -> Operations.ListPushTokens.Output {
        let account = try await existingAccount(input.path.account)
        let tokens = try await storage { try await store.pushTokens(of: account) }
        return .ok(.init(body: .json(.init(tokens: tokens))))
    }

    // MARK: Messages

    func sendMessage(_ input: Operations.SendMessage.Input) async throws -> Operations.SendMessage.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let request = SendRequest(
            conversation: ConversationID(rawValue: input.path.conversation),
            clientID: body.clientId,
            type: body._type,
            body: body.body,
            replyTo: body.replyTo,
            needsReadReceipt: body.needsReadReceipt
        )
        let result = try await service { () throws(RequestError) in
            try await messages.send(request, from: DeviceContext.app(acting: body.from))
        }
        await publish(result.publications)
        return .ok(.init(body: .json(result.ack)))
    }

    func listMessages(_ input: Operations.ListMessages.Input) async throws -> Operations.ListMessages.Output {
        let account = try Self.account(input.query.account)
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
        let limit = input.query.limit ?? 100
        guard (1...1000).contains(limit) else { throw HTTPRequestError(.invalidArgument, "limit must be 1–1000.") }
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

    // MARK: Receipts

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

    // MARK: Recall

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
        if let seconds = body.windowSeconds, !(0...31_536_000).contains(seconds) {
            throw HTTPRequestError(.invalidArgument, "windowSeconds must be 0–31,536,000 (a year).")
        }
        let window = body.windowSeconds.map { Duration.seconds($0) }
        let result = try await service { () throws(RequestError) in try await recalls.recallForApp(recall, window: window) }
        await publish(result.publications)
        return .ok(.init(body: .json(result.ack)))
    }

    // MARK: Groups

    func createGroup(_ input: Operations.CreateGroup.Input) async throws -> Operations.CreateGroup.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let owner = try Self.account(body.owner.rawValue)
        let request = CreateGroupRequest(
            group: GroupID(rawValue: body.group),
            clientID: body.clientId ?? Self.generatedClientID(),
            members: body.members ?? []
        )
        let result = try await service { () throws(RequestError) in
            try await groups.create(request, from: DeviceContext.app(acting: owner))
        }
        await publish(result.publications)
        return .created(.init(body: .json(result.ack)))
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
            role: body.role.flatMap { MemberRole(rawValue: $0.rawValue) }
        )
        let result = try await service { () throws(RequestError) in
            try await groups.change(request, from: DeviceContext.app(acting: actor))
        }
        await publish(result.publications)
        return .ok(.init(body: .json(result.ack)))
    }

    func dismissGroup(_ input: Operations.DismissGroup.Input) async throws -> Operations.DismissGroup.Output {
        let group = ConversationID.group(GroupID(rawValue: input.path.group))
        let result = try await service { () throws(RequestError) in
            try await groups.dismissForApp(group, clientID: Self.generatedClientID())
        }
        await publish(result.publications)
        return .ok(.init(body: .json(result.ack)))
    }

    // MARK: Server

    func getServerConfiguration(
        _ input: Operations.GetServerConfiguration.Input
    ) async throws -> Operations.GetServerConfiguration.Output {
        .ok(.init(body: .json(.init(settings: settings.map { .init(name: $0.name, value: $0.value) }))))
    }

    // MARK: Webhooks

    func createWebhook(_ input: Operations.CreateWebhook.Input) async throws -> Operations.CreateWebhook.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        guard let url = URL(string: body.url), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false, body.url.utf8.count <= 2000
        else {
            throw HTTPRequestError(.invalidArgument, "url must be an http or https URL with a host.")
        }
        let endpoint = WebhookEndpoint(
            id: "whep_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20),
            url: body.url,
            events: body.events.map { Array(Set($0.map { WebhookEventType(rawValue: $0.rawValue) })).sorted { $0.rawValue < $1.rawValue } },
            secret: WebhookSigner.newSecret(),
            createdAt: now()
        )
        try await storage { try await store.createWebhookEndpoint(endpoint) }
        dispatcher.reloadEndpoints()
        return .created(.init(body: .json(.init(
            id: endpoint.id,
            url: endpoint.url,
            events: Self.events(endpoint),
            createdAt: endpoint.createdAt,
            secret: endpoint.secret
        ))))
    }

    func listWebhooks(_ input: Operations.ListWebhooks.Input) async throws -> Operations.ListWebhooks.Output {
        let endpoints = try await storage { try await store.webhookEndpoints() }
        return .ok(.init(body: .json(.init(endpoints: endpoints.map(Self.shown)))))
    }

    func getWebhook(_ input: Operations.GetWebhook.Input) async throws -> Operations.GetWebhook.Output {
        .ok(.init(body: .json(Self.shown(try await endpoint(input.path.endpointId)))))
    }

    func deleteWebhook(_ input: Operations.DeleteWebhook.Input) async throws -> Operations.DeleteWebhook.Output {
        guard try await storage({ try await store.deleteWebhookEndpoint(input.path.endpointId) }) else {
            throw Self.noEndpoint(input.path.endpointId)
        }
        dispatcher.reloadEndpoints()
        return .noContent(.init())
    }

    func rotateWebhookSecret(
        _ input: Operations.RotateWebhookSecret.Input
    ) async throws -> Operations.RotateWebhookSecret.Output {
        let until = Timestamp(milliseconds: now().rawValue + 86_400_000)
        let secret = WebhookSigner.newSecret()
        guard
            try await storage({
                try await store.rotateWebhookSecret(of: input.path.endpointId, to: secret, previousValidUntil: until)
            }) != nil
        else { throw Self.noEndpoint(input.path.endpointId) }
        dispatcher.reloadEndpoints()
        return .ok(.init(body: .json(.init(secret: secret, previousSecretExpiresAt: until))))
    }

    func listWebhookDeliveries(
        _ input: Operations.ListWebhookDeliveries.Input
    ) async throws -> Operations.ListWebhookDeliveries.Output {
        let endpoint = try await endpoint(input.path.endpointId)
        var before: Int64?
        if let cursor = input.query.cursor {
            guard let seq = Int64(cursor), seq > 0 else { throw HTTPRequestError(.invalidArgument, "cursor is not valid.") }
            before = seq
        }
        let limit = input.query.limit ?? 50
        guard (1...100).contains(limit) else { throw HTTPRequestError(.invalidArgument, "limit must be 1–100.") }
        let state = input.query.state.flatMap { WebhookDelivery.State(rawValue: $0.rawValue) }
        let page = try await storage {
            try await store.webhookDeliveries(of: endpoint.id, state: state, before: before, limit: limit + 1)
        }
        let shown = page.prefix(limit)
        return .ok(.init(body: .json(.init(
            deliveries: shown.map { delivery in
                .init(
                    seq: delivery.seq,
                    eventId: delivery.eventID,
                    _type: Components.Schemas.WebhookEventType(rawValue: delivery.type.rawValue) ?? .message_created,
                    conversation: delivery.type == .messageUndelivered
                        ? ConversationID(rawValue: String(delivery.conversation.rawValue.dropFirst("push:".count)))
                        : delivery.conversation,
                    createdAt: delivery.createdAt,
                    state: Components.Schemas.WebhookDelivery.StatePayload(rawValue: delivery.state.rawValue) ?? .pending,
                    attempts: delivery.attempts,
                    nextAttemptAt: delivery.state == .pending ? delivery.nextAttemptAt : nil,
                    expiresAt: delivery.expiresAt ?? webhooks.retry.expiry(from: delivery.createdAt),
                    lastStatus: delivery.lastStatus,
                    lastError: delivery.lastError,
                    deliveredAt: delivery.deliveredAt
                )
            },
            nextCursor: page.count > limit ? shown.last.map { String($0.seq) } : nil
        ))))
    }

    func retryWebhookDelivery(
        _ input: Operations.RetryWebhookDelivery.Input
    ) async throws -> Operations.RetryWebhookDelivery.Output {
        let count = try await retry(input.path.endpointId, seq: input.path.deliverySeq)
        guard count > 0 else {
            throw HTTPRequestError(
                RequestError(.requestNotFound, "Endpoint '\(input.path.endpointId)' has no failed delivery \(input.path.deliverySeq).")
            )
        }
        return .ok(.init(body: .json(.init(retried: count))))
    }

    func retryFailedWebhookDeliveries(
        _ input: Operations.RetryFailedWebhookDeliveries.Input
    ) async throws -> Operations.RetryFailedWebhookDeliveries.Output {
        .ok(.init(body: .json(.init(retried: try await retry(input.path.endpointId, seq: nil)))))
    }

    private func retry(_ id: String, seq: Int64?) async throws -> Int {
        let endpoint = try await endpoint(id)
        let time = now()
        return try await storage {
            try await store.retryWebhookDeliveries(
                of: endpoint.id,
                seq: seq,
                now: time,
                expiresAt: webhooks.retry.expiry(from: time)
            )
        }
    }

    private func endpoint(_ id: String) async throws -> WebhookEndpoint {
        guard let endpoint = try await storage({ try await store.webhookEndpoint(id) }) else {
            throw Self.noEndpoint(id)
        }
        return endpoint
    }

    static func noEndpoint(_ id: String) -> HTTPRequestError {
        HTTPRequestError(RequestError(.requestNotFound, "No webhook endpoint is named '\(id.prefix(64))'."))
    }

    static func events(_ endpoint: WebhookEndpoint) -> [Components.Schemas.WebhookEventType]? {
        endpoint.events?.compactMap { Components.Schemas.WebhookEventType(rawValue: $0.rawValue) }
    }

    static func shown(_ endpoint: WebhookEndpoint) -> Components.Schemas.WebhookEndpoint {
        .init(
            id: endpoint.id,
            url: endpoint.url,
            events: events(endpoint),
            createdAt: endpoint.createdAt,
            previousSecretExpiresAt: endpoint.previousSecretExpiresAt
        )
    }

    // MARK: Helpers


    /// A client id for a group change the caller gave none for (creating or changing twice is then not idempotent).
    static func generatedClientID() -> ClientMessageID {
        ClientMessageID(rawValue: "rest-" + UUID().uuidString.lowercased())
    }

    static func account(_ text: String) throws -> AccountID {
        let account = AccountID(rawValue: text)
        guard account.isValid else {
            throw HTTPRequestError(.invalidArgument, "Account ids are 1–128 characters of [A-Za-z0-9._@-].")
        }
        return account
    }

    static var unsupportedBody: HTTPRequestError {
        HTTPRequestError(.invalidArgument, "The body must be JSON (Content-Type: application/json).")
    }

    private func existingAccount(_ text: String) async throws -> AccountID {
        let account = try Self.account(text)
        guard try await storage({ try await store.accountExists(account) }) else {
            throw HTTPRequestError(RequestError(.accountNotFound, "Account '\(account)' does not exist."))
        }
        return account
    }

    private func publish(_ publications: [Publication]) async {
        for publication in publications { await bus.publish(publication) }
    }

    private func storage<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as StorageError { throw HTTPRequestError(RequestError(error)) }
    }

    private func service<T>(_ body: () async throws(RequestError) -> T) async throws -> T {
        do { return try await body() } catch { throw HTTPRequestError(error) }
    }
}
