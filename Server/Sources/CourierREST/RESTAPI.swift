// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import Logging
internal import OpenAPIRuntime
internal import CourierServerCore
internal import CourierWebhooks

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
    let typing: TypingService
    let profiles: ProfileService
    let recalls: RecallService
    let edits: EditService
    let reactions: ReactionService
    let registry: ConnectionRegistry
    let tokens: TokenAuthority
    let signingKeys: SigningKeyRing
    let credentials: Credentials
    let bus: any EventBus
    let webhooks: CourierServerConfiguration.Webhooks
    let dispatcher: WebhookDispatcher
    /// The settings in force, read when asked (the port is known once the server listens).
    let settings: @Sendable () -> [(name: String, value: String)]
    let logLevel: LogLevelControl
    let now: @Sendable () -> Timestamp

    /// Most accounts in one bulk registration.
    static let maxAccounts = 1000

    // MARK: Server

    func getServerConfiguration(
        _ input: Operations.GetServerConfiguration.Input
    ) async throws -> Operations.GetServerConfiguration.Output {
        .ok(.init(body: .json(.init(settings: settings().map { .init(name: $0.name, value: $0.value) }))))
    }

    func getLogLevel(_ input: Operations.GetLogLevel.Input) async throws -> Operations.GetLogLevel.Output {
        .ok(.init(body: .json(.init(level: .init(rawValue: logLevel.level.rawValue) ?? .info))))
    }

    func setLogLevel(_ input: Operations.SetLogLevel.Input) async throws -> Operations.SetLogLevel.Output {
        guard case .json(let body) = input.body else { throw Self.unsupportedBody }
        guard let level = Logger.Level(rawValue: body.level.rawValue) else {
            throw HTTPRequestError(.invalidArgument, "level must be trace, debug, info, notice, warning, error or critical.")
        }
        logLevel.set(level)
        return .ok(.init(body: .json(.init(level: body.level))))
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

    func existingAccount(_ text: String) async throws -> AccountID {
        let account = try Self.account(text)
        guard try await storage({ try await store.accountExists(account) }) else {
            throw HTTPRequestError(RequestError(.accountNotFound, "Account '\(account)' does not exist."))
        }
        return account
    }

    /// `account`, registered and not deactivated: what the app may send as, or mint a token for.
    ///
    /// - Throws: `account.notFound`; `account.deactivated` (409).
    func activeAccount(_ text: String) async throws -> AccountID {
        let account = try Self.account(text)
        guard let status = try await storage({ try await store.accountStatus(account) }) else {
            throw HTTPRequestError(RequestError(.accountNotFound, "Account '\(account)' does not exist."))
        }
        guard status.deactivatedAt == nil else {
            throw HTTPRequestError(
                RequestError(.accountDeactivated, "Account '\(account)' is deactivated: reactivate it first.")
            )
        }
        return account
    }

    func publish(_ publications: [Publication]) async {
        for publication in publications { bus.publish(publication) }
    }

    func storage<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as StorageError { throw HTTPRequestError(RequestError(error)) }
    }

    func service<T>(_ body: () async throws(RequestError) -> T) async throws -> T {
        do { return try await body() } catch { throw HTTPRequestError(error) }
    }

    /// A service's write: its events are published, and its answer returned.
    func published<Ack>(_ body: () async throws(RequestError) -> ServiceResult<Ack>) async throws -> Ack {
        let result = try await service(body)
        await publish(result.publications)
        return result.ack
    }
}
