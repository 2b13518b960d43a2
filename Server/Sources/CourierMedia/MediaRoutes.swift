// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
package import Hummingbird
internal import NIOCore
package import CourierServerCore

/// The media endpoints (docs/media.md): written by hand beside the generated API, because they take a client token
/// as well as the app secret and carry bytes rather than JSON. openapi.yaml documents them like the rest.
package enum MediaRoutes {
    package static func add(
        to router: RouterGroup<CourierRequestContext>,
        media: MediaService,
        access: RESTAccess,
        tokens: TokenAuthority,
        store: any CourierStore
    ) {
        let callers = MediaCallers(access: access, tokens: tokens, store: store)
        router.post("/v1/conversations/:conversation/media") { request, context -> Response in
            let conversation = ConversationID(rawValue: try context.parameters.require("conversation"))
            return try await callers.run("uploadMedia", request, context, target: "conversation=\(conversation)") { caller in
                try await MediaRoutes.upload(request, into: conversation, by: caller, media: media)
            }
        }
        router.post("/v1/accounts/:account/media") { request, context -> Response in
            let account = AccountID(rawValue: try context.parameters.require("account"))
            return try await callers.run("uploadAccountMedia", request, context, target: "account=\(account)") { caller in
                try await MediaRoutes.upload(request, into: .files(of: account), by: caller, media: media)
            }
        }
        for method in [HTTPRequest.Method.get, .head] {
            router.on("/v1/media/:id", method: method) { request, context -> Response in
                let id = try context.parameters.require("id")
                return try await callers.run("getMedia", request, context, target: "mediaId=\(id)") { caller in
                    let (record, fetch) = try await media.fetch(id, by: caller)
                    var headers: HTTPFields = [
                        .contentType: record.contentType,
                        .eTag: "\"\(record.sha256)\"",
                        // Kept by a device an hour at most: a recall erases the file, and caches should let go of it.
                        .cacheControl: "private, max-age=3600",
                        // An uploaded file is served from the API's origin (the console's too): never run as a page.
                        .contentSecurityPolicy: "default-src 'none'; sandbox",
                        .xContentTypeOptions: "nosniff",
                    ]
                    switch fetch {
                    case .redirect(let url):
                        headers[.location] = url
                        headers[.cacheControl] = "no-store"
                        return Response(status: .found, headers: headers)
                    case .file(let path):
                        headers[.contentLength] = String(record.size)
                        guard method == .get else {
                            // The row without its bytes (a crash between them) is no file.
                            guard FileManager.default.fileExists(atPath: path) else {
                                throw HTTPRequestError(MediaService.notFound)
                            }
                            return Response(status: .ok, headers: headers)
                        }
                        let body: ResponseBody
                        do { body = try await FileIO().loadFile(path: path, context: context) } catch {
                            // The row without its bytes (a crash between them): as if there were no file.
                            throw HTTPRequestError(MediaService.notFound)
                        }
                        return Response(status: .ok, headers: headers, body: body)
                    }
                }
            }
        }
        router.delete("/v1/media/:id") { request, context -> Response in
            let id = try context.parameters.require("id")
            let call = try await access.authenticate(request, peer: context.remoteAddress?.ipAddress, requestID: context.id)
            return try await access.perform("deleteMedia", target: "mediaId=\(id)", call: call, status: { $0.status.code }) {
                do { try await media.delete(id) } catch let error as RequestError { throw HTTPRequestError(error) }
                return Response(status: .noContent)
            }
        }
    }

    /// Stores an upload into a conversation or an account's own files, and answers `201` with the file.
    static func upload(
        _ request: Request,
        into place: ConversationID,
        by caller: MediaService.Caller,
        media: MediaService
    ) async throws -> Response {
        let record = try await media.upload(
            request.body,
            contentType: request.headers[.contentType],
            declaredLength: request.headers[.contentLength].flatMap { Int($0) },
            into: place,
            by: caller
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Response(
            status: .created,
            headers: [.contentType: "application/json", .location: MediaRoutes.address(of: record.id)],
            body: .init(byteBuffer: .init(bytes: try encoder.encode(MediaJSON(record))))
        )
    }

    /// A file's address, relative to the server: what a message carries (``MediaReference``).
    static func address(of id: String) -> String { "/v1/media/\(id)" }
}

/// The JSON of a stored file.
struct MediaJSON: Encodable {
    let id: String
    let url: String
    /// The conversation it belongs to; `nil` for an account's own file.
    let conversation: String?
    /// For an account's own file (its avatar): the account.
    let account: String?
    let uploader: String?
    let contentType: String
    let size: Int64
    let sha256: String
    let createdAt: Int64

    init(_ record: MediaRecord) {
        id = record.id
        url = MediaRoutes.address(of: record.id)
        account = record.conversation.filesAccount?.rawValue
        conversation = account == nil ? record.conversation.rawValue : nil
        uploader = record.uploader?.rawValue
        contentType = record.contentType
        size = record.size
        sha256 = record.sha256
        createdAt = record.createdAt.rawValue
    }
}

/// Who calls a media endpoint: the app (`Authorization: Bearer` with the app secret or an API key, as the rest of the
/// REST API: its scopes and audit apply) or an account (`Bearer CLIENT_TOKEN`, its account active and the token not
/// revoked, as at a connect).
struct MediaCallers: Sendable {
    let access: RESTAccess
    let tokens: TokenAuthority
    let store: any CourierStore

    /// Runs `operationID` for the caller of `request`: as the app's credential allows, or as the token's account. A
    /// refusal (``RequestError``) answers as its HTTP error.
    func run(
        _ operationID: String,
        _ request: Request,
        _ context: CourierRequestContext,
        target: String,
        _ body: (MediaService.Caller) async throws -> Response
    ) async throws -> Response {
        let header = request.headers[.authorization] ?? ""
        // The app's credentials (the app secret, an API key) are the REST API's; anything else is a client token.
        guard !access.credentials.isAppCredential(header) else {
            let call = try await access.authenticate(request, peer: context.remoteAddress?.ipAddress, requestID: context.id)
            return try await access.perform(operationID, target: target, call: call, status: { $0.status.code }) {
                do { return try await body(.app) } catch let error as RequestError { throw HTTPRequestError(error) }
            }
        }
        do {
            let token = try await tokens.verify(String(header.dropFirst(7)))
            let status = try await storing { () throws(StorageError) in try await store.accountStatus(token.account) }
            if let refusal = status?.refusal(tokenIssuedAt: token.issuedAt) { throw refusal }
            return try await body(.account(token.account))
        } catch let error as RequestError {
            throw HTTPRequestError(error)
        }
    }
}
