// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import OpenAPIRuntime
internal import CourierServerCore

extension RESTAPI {
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

    func listAccounts(_ input: Operations.ListAccounts.Input) async throws -> Operations.ListAccounts.Output {
        let limit = try Self.pageLimit(input.query.limit)
        let cursor = try input.query.cursor.map(Self.account)
        let prefix = try input.query.prefix.map { try Self.account($0).rawValue }
        let page = try await storage { try await store.accounts(prefix: prefix, after: cursor, limit: limit + 1) }
        let shown = page.prefix(limit)
        return .ok(.init(body: .json(.init(
            accounts: shown.map(Self.shown),
            nextCursor: page.count > limit ? shown.last?.account.rawValue : nil
        ))))
    }

    // MARK: Moderation

    func disconnectDevice(
        _ input: Operations.DisconnectDevice.Input
    ) async throws -> Operations.DisconnectDevice.Output {
        let account = try await existingAccount(input.path.account)
        let device = DeviceID(rawValue: input.path.device)
        guard device.isValid else {
            throw HTTPRequestError(.invalidArgument, "Device ids are 1–128 characters of [A-Za-z0-9._@-].")
        }
        try await storage { try await store.announce(.deviceKicked(account, device: device)) }
        registry.end(account, for: .kicked, device: device)
        return .noContent(.init())
    }

    func deactivateAccount(
        _ input: Operations.DeactivateAccount.Input
    ) async throws -> Operations.DeactivateAccount.Output {
        let account = try Self.account(input.path.account)
        let status = try await moderate(account) { try await store.setDeactivated(account, at: now()) }
        return .ok(.init(body: .json(Self.shown(status))))
    }

    func reactivateAccount(
        _ input: Operations.ReactivateAccount.Input
    ) async throws -> Operations.ReactivateAccount.Output {
        let account = try Self.account(input.path.account)
        let status = try await moderate(account) { try await store.setDeactivated(account, at: nil) }
        return .ok(.init(body: .json(Self.shown(status))))
    }

    func revokeTokens(_ input: Operations.RevokeTokens.Input) async throws -> Operations.RevokeTokens.Output {
        let account = try Self.account(input.path.account)
        let status = try await moderate(account) { try await store.revokeTokens(of: account, before: now()) }
        return .ok(.init(body: .json(Self.shown(status))))
    }

    /// Runs a moderation write, then ends the sessions on this node that the new status no longer allows (the other
    /// nodes learn it from the write's notification and do the same).
    private func moderate(
        _ account: AccountID,
        _ write: () async throws -> AccountStatus?
    ) async throws -> AccountStatus {
        guard let status = try await storage(write) else {
            throw HTTPRequestError(RequestError(.accountNotFound, "Account '\(account)' does not exist."))
        }
        status.endSessions(in: registry)
        return status
    }

    static func shown(_ status: AccountStatus) -> Components.Schemas.AccountStatus {
        .init(
            id: status.account,
            createdAt: status.createdAt,
            deactivatedAt: status.deactivatedAt,
            tokensRevokedAt: status.tokensRevokedAt
        )
    }

    func getAccount(_ input: Operations.GetAccount.Input) async throws -> Operations.GetAccount.Output {
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(.init(id: account, devicesOnline: registry.connectionCount(of: account)))))
    }

    func createToken(_ input: Operations.CreateToken.Input) async throws -> Operations.CreateToken.Output {
        let account = try await activeAccount(input.path.account)
        var ttl: Int64 = 30 * 86_400
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        if let requested = body.ttlSeconds {
            guard (60...31_536_000).contains(requested) else {
                throw HTTPRequestError(.invalidArgument, "ttlSeconds must be 60–31,536,000 (one year).")
            }
            ttl = requested
        }
        // The default gives way to the server's maximum (`{}` asks for the defaults, and gets a token); a lifetime
        // asked for above the maximum is refused.
        if body.ttlSeconds == nil, let maxLifetime = tokens.maxLifetime { ttl = min(ttl, Int64(maxLifetime)) }
        if let maxLifetime = tokens.maxLifetime, Double(ttl) > maxLifetime {
            throw HTTPRequestError(
                .invalidArgument,
                "ttlSeconds exceeds this server's maximum token lifetime (\(Int(maxLifetime)) s)."
            )
        }
        let issued = Date()
        let token = try await storage { try await tokens.token(for: account, lifetime: .seconds(ttl), issuedAt: issued) }
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

    func getTypingSettings(_ input: Operations.GetTypingSettings.Input) async throws -> Operations.GetTypingSettings.Output {
        let account = try await existingAccount(input.path.account)
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await typing.settings(TypingSettingsRequest(), from: DeviceContext.app(acting: account))
        })))
    }

    func setTypingSettings(_ input: Operations.SetTypingSettings.Input) async throws -> Operations.SetTypingSettings.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let account = try await existingAccount(input.path.account)
        let request = TypingSettingsRequest(sendTypingIndicators: body.sendTypingIndicators)
        return .ok(.init(body: .json(try await service { () throws(RequestError) in
            try await typing.settings(request, from: DeviceContext.app(acting: account))
        })))
    }

    func getAccountProfile(_ input: Operations.GetAccountProfile.Input) async throws -> Operations.GetAccountProfile.Output {
        let account = try Self.account(input.path.account)
        guard let profile = try await storage({ try await store.accountProfiles(of: [account]).first }) else {
            throw HTTPRequestError(RequestError(.accountNotFound, "Account '\(account)' does not exist."))
        }
        return .ok(.init(body: .json(profile)))
    }

    func setAccountProfile(_ input: Operations.SetAccountProfile.Input) async throws -> Operations.SetAccountProfile.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let account = try Self.account(input.path.account)
        let fields = SetAccountProfileRequest(
            displayName: body.displayName, avatar: body.avatar, ext: body.ext?.additionalProperties
        )
        let ack = try await published { () throws(RequestError) in
            try await profiles.set([AccountProfileChange(account: account, fields: fields)], excluding: nil)
        }
        return .ok(.init(body: .json(ack[0])))
    }

    func setAccountProfiles(_ input: Operations.SetAccountProfiles.Input) async throws -> Operations.SetAccountProfiles.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        let changes = try body.profiles.map { item in
            AccountProfileChange(
                account: try Self.account(item.account.rawValue),
                fields: SetAccountProfileRequest(
                    displayName: item.displayName, avatar: item.avatar, ext: item.ext?.additionalProperties
                )
            )
        }
        let ack = try await published { () throws(RequestError) in try await profiles.set(changes, excluding: nil) }
        return .ok(.init(body: .json(.init(profiles: ack))))
    }

    func listPushTokens(_ input: Operations.ListPushTokens.Input) async throws -> Operations.ListPushTokens.Output {
        let account = try await existingAccount(input.path.account)
        let tokens = try await storage { try await store.pushTokens(of: account) }
        return .ok(.init(body: .json(.init(tokens: tokens))))
    }
}
