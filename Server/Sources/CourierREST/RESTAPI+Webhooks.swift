// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore
internal import CourierWebhooks

extension RESTAPI {
    func createWebhook(_ input: Operations.CreateWebhook.Input) async throws -> Operations.CreateWebhook.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        try Self.checkURL(body.url)
        // An endpoint that names no event would never receive anything: leave `events` out for all of them.
        if body.events?.isEmpty == true {
            throw HTTPRequestError(.invalidArgument, "events must name at least one event type (leave it out for all).")
        }
        let batch = try Self.batch(body.batch) ?? 0
        try await checkReachable(body.url)
        let endpoint = WebhookEndpoint(
            id: "whep_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20),
            url: body.url,
            events: body.events.map(Self.types),
            secret: WebhookSigner.newSecret(),
            createdAt: now(),
            batch: batch
        )
        try await storage { try await store.createWebhookEndpoint(endpoint) }
        dispatcher.reloadEndpoints()
        return .created(.init(body: .json(.init(
            id: endpoint.id,
            url: endpoint.url,
            events: Self.events(endpoint),
            createdAt: endpoint.createdAt,
            secret: endpoint.secret,
            batch: endpoint.batch
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
                // An account's events are queued as `account:<id>`: about an account, not a conversation.
                let queue = delivery.conversation.rawValue
                let account = queue.hasPrefix("account:") ? AccountID(rawValue: String(queue.dropFirst("account:".count))) : nil
                return .init(
                    seq: delivery.position,
                    eventId: delivery.eventID,
                    _type: Components.Schemas.WebhookEventType(rawValue: delivery.type.rawValue) ?? .message_created,
                    conversation: account != nil ? nil : delivery.type == .messageUndelivered
                        ? ConversationID(rawValue: String(delivery.conversation.rawValue.dropFirst("push:".count)))
                        : delivery.conversation,
                    account: account,
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
            nextCursor: page.count > limit ? shown.last.map { String($0.position) } : nil
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
        let count = try await storage {
            try await store.retryWebhookDeliveries(
                of: endpoint.id,
                seq: seq,
                now: time,
                expiresAt: webhooks.retry.expiry(from: time)
            )
        }
        if count > 0 { dispatcher.parked() }
        return count
    }

    private func endpoint(_ id: String) async throws -> WebhookEndpoint {
        guard let endpoint = try await storage({ try await store.webhookEndpoint(id) }) else {
            throw Self.noEndpoint(id)
        }
        return endpoint
    }

    /// An http or https URL with a host, of at most 2,000 bytes.
    static func checkURL(_ text: String) throws {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false, text.utf8.count <= 2000
        else {
            throw HTTPRequestError(.invalidArgument, "url must be an http or https URL with a host.")
        }
    }

    /// Refuses, with 400 `webhook.urlNotAllowed`, a URL whose host is or resolves to an address webhooks may not
    /// reach (``WebhookAddressPolicy``): every address the name resolves to is checked. Each delivery's
    /// connection is checked again (the name may resolve elsewhere by then).
    func checkReachable(_ text: String) async throws {
        guard let url = URL(string: text), let origin = WebhookHTTP.target(of: url)?.origin else {
            throw HTTPRequestError(.invalidArgument, "url must be an http or https URL with a host.")
        }
        // An IPv6 literal's brackets, should the URL's host keep them.
        var host = origin.host
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let policy = WebhookAddressPolicy(allowPrivate: webhooks.allowPrivateAddresses)
        if let refusal = await policy.refusal(ofHost: host) {
            throw HTTPRequestError(.webhookURLNotAllowed, refusal)
        }
    }

    /// A batch size as asked for: 0–100 (the schema says so too; checked here as well, so the answer is the stable
    /// `invalidArgument` whichever layer sees it first).
    static func batch(_ asked: Int?) throws -> Int? {
        guard let asked else { return nil }
        guard (0...WebhookEndpoint.maxBatch).contains(asked) else {
            throw HTTPRequestError(.invalidArgument, "batch must be 0–\(WebhookEndpoint.maxBatch) (0: one event per request).")
        }
        return asked
    }

    /// The event types named, each once, sorted.
    static func types(_ named: [Components.Schemas.WebhookEventType]) -> [WebhookEventType] {
        Array(Set(named.map { WebhookEventType(rawValue: $0.rawValue) })).sorted { $0.rawValue < $1.rawValue }
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
            previousSecretExpiresAt: endpoint.previousSecretExpiresAt,
            pausedAt: endpoint.pausedAt,
            batch: endpoint.batch
        )
    }

    func updateWebhook(_ input: Operations.UpdateWebhook.Input) async throws -> Operations.UpdateWebhook.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        if let url = body.url { try Self.checkURL(url) }
        if body.allEvents == true && body.events != nil {
            throw HTTPRequestError(.invalidArgument, "Give events or allEvents: true, not both.")
        }
        if body.events?.isEmpty == true {
            throw HTTPRequestError(.invalidArgument, "events must name at least one event type.")
        }
        let batch = try Self.batch(body.batch)
        if let url = body.url { try await checkReachable(url) }
        let events: [WebhookEventType]?? =
            body.allEvents == true ? .some(nil) : body.events.map { .some(Self.types($0)) } ?? .none
        guard let endpoint = try await storage({
            try await store.updateWebhookEndpoint(input.path.endpointId, url: body.url, events: events, batch: batch)
        }) else { throw Self.noEndpoint(input.path.endpointId) }
        dispatcher.reloadEndpoints()
        return .ok(.init(body: .json(Self.shown(endpoint))))
    }

    func pauseWebhook(_ input: Operations.PauseWebhook.Input) async throws -> Operations.PauseWebhook.Output {
        .ok(.init(body: .json(Self.shown(try await pause(input.path.endpointId, at: now())))))
    }

    func resumeWebhook(_ input: Operations.ResumeWebhook.Input) async throws -> Operations.ResumeWebhook.Output {
        let endpoint = try await pause(input.path.endpointId, at: nil)
        dispatcher.parked()
        return .ok(.init(body: .json(Self.shown(endpoint))))
    }

    private func pause(_ id: String, at time: Timestamp?) async throws -> WebhookEndpoint {
        guard let endpoint = try await storage({ try await store.pauseWebhookEndpoint(id, at: time) }) else {
            throw Self.noEndpoint(id)
        }
        dispatcher.reloadEndpoints()
        return endpoint
    }
}
