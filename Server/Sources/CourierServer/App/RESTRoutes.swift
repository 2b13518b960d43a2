// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import Hummingbird
internal import Logging
internal import NIOCore

/// The HTTP side: health, and the REST API for the app's own backend (authorized by the app secret, never by a
/// client token).
enum RESTRoutes {
    static func router(
        store: any CourierStore,
        secret: AppSecret,
        recalls: RecallService,
        reads: ReadService,
        bus: any EventBus,
        metrics: ServerMetrics,
        changeFeed: (any ChangeFeed)?,
        maxBodyBytes: Int,
        now: @escaping @Sendable () -> Timestamp
    ) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: CodedErrorMiddleware())
        // One line per API request at info (method and path; never a header or a body), with Hummingbird's
        // `hb.request.id` on every line the request logs. Health probes are not logged: they come every few seconds.
        let api = router.group().add(middleware: LogRequestsMiddleware(.info))
        let body = BodyDecoder(maxBytes: maxBodyBytes)
        // Liveness: the process answers (`/health` is the same, for the probes configured before readiness existed).
        for path in ["/health", "/health/live"] {
            router.get(RouterPath(path)) { _, _ in
                Response(
                    status: .ok,
                    headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: .init(string: #"{"status":"ok"}"#))
                )
            }
        }
        // Readiness: the store takes writes now and, on PostgreSQL, other nodes' changes reach this one. A load
        // balancer sends devices elsewhere while it answers 503.
        router.get("/health/ready") { _, _ -> Response in
            var writes = "writable"
            do {
                try await store.checkWritable()
            } catch {
                writes = "unavailable"
            }
            let feed = changeFeed.map { $0.isListening ? "listening" : "disconnected" } ?? "none"
            let ready = writes == "writable" && feed != "disconnected"
            let body = #"{"changeFeed":"\#(feed)","status":"\#(ready ? "ready" : "unavailable")","store":"\#(writes)"}"#
            return Response(
                status: ready ? .ok : .serviceUnavailable,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: .init(string: body))
            )
        }
        let check = AppSecretCheck(secret: secret)
        // Prometheus text exposition (docs/operations.md), behind the app secret like the rest of the API.
        api.get("/metrics") { request, _ -> Response in
            try check.require(request)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: .init(bytes: metrics.exposition()))
            )
        }
        api.put("/v1/accounts/:account") { request, context -> Response in
            try check.require(request)
            let account = AccountID(rawValue: try context.parameters.require("account"))
            guard account.isValid else {
                throw HTTPRequestError(.invalidArgument, "Account ids are 1–128 characters of [A-Za-z0-9._@-].")
            }
            do {
                try await store.registerAccount(account, at: now())
            } catch let error as StorageError {
                throw HTTPRequestError(RequestError(error))
            }
            return Response(status: .noContent)
        }
        // Many accounts at once (an import, a large group about to be created): up to 1,000, in one transaction.
        api.post("/v1/accounts") { request, context -> Response in
            try check.require(request)
            let body = try await body.decode(request, as: AccountsBody.self)
            guard (1...AccountsBody.maxCount).contains(body.accounts.count) else {
                throw HTTPRequestError(.invalidArgument, "Name 1–\(AccountsBody.maxCount) accounts per request.")
            }
            if let bad = body.accounts.first(where: { !$0.isValid }) {
                throw HTTPRequestError(
                    .invalidArgument,
                    "'\(bad.rawValue.prefix(200))' is not an account id (1–128 characters of [A-Za-z0-9._@-])."
                )
            }
            do {
                try await store.registerAccounts(body.accounts, at: now())
            } catch let error as StorageError {
                throw HTTPRequestError(RequestError(error))
            }
            return Response(status: .noContent)
        }
        // The push tokens of an account's devices, for the app's backend that sends the pushes (until webhooks hand
        // them over as they change): `{"tokens": [{"device", "platform", "token", "sandbox", "updatedAt"}]}`.
        api.get("/v1/accounts/:account/push-tokens") { request, context -> Response in
            try check.require(request)
            let account = AccountID(rawValue: try context.parameters.require("account"))
            let tokens: [PushToken]
            do {
                guard try await store.accountExists(account) else {
                    throw HTTPRequestError(.accountNotFound, "Account '\(account)' does not exist.", status: .notFound)
                }
                tokens = try await store.pushTokens(of: account)
            } catch let error as StorageError {
                throw HTTPRequestError(RequestError(error))
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: .init(bytes: try encoder.encode(PushTokensBody(tokens: tokens))))
            )
        }
        // The app's backend recalls a message for its sender, with no time window (SPEC §6: "the server API acting
        // for the app … may override the window").
        api.post("/v1/conversations/:conversation/recall") { request, context -> Response in
            try check.require(request)
            let conversation = ConversationID(rawValue: try context.parameters.require("conversation"))
            let body = try await body.decode(request, as: AppRecallBody.self)
            let recall = RecallRequest(
                conversation: conversation,
                messageID: body.messageID,
                mode: body.mode,
                postscript: body.postscript,
                ext: body.ext,
                pushText: body.pushText,
                pushPayload: body.pushPayload,
                countsAsUnread: body.countsAsUnread
            )
            let result: ServiceResult<SendAck>
            do throws(RequestError) {
                result = try await recalls.recallForApp(recall)
            } catch {
                throw HTTPRequestError(error)
            }
            for publication in result.publications { await bus.publish(publication) }
            let data = try FrameCoder().encode(result.ack)
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: .init(string: data))
            )
        }
        // The app's backend reads a conversation for several of its members at once (up to 1,000, one transaction),
        // e.g. for reads made on another channel of the app. Each counts as the account's own `read` with `seq`.
        api.post("/v1/conversations/:conversation/reads") { request, context -> Response in
            try check.require(request)
            let conversation = ConversationID(rawValue: try context.parameters.require("conversation"))
            let body = try await body.decode(request, as: AppReadsBody.self)
            let publications: [Publication]
            do throws(RequestError) {
                publications = try await reads.readForApp(
                    AppReadRequest(conversation: conversation, accounts: body.accounts, seq: body.seq)
                )
            } catch {
                throw HTTPRequestError(error)
            }
            for publication in publications { await bus.publish(publication) }
            return Response(status: .noContent)
        }
        return router
    }
}

/// Reads a request's JSON body, up to the published limit. A body over the limit is refused with 413
/// `request.tooLarge`; one that does not decode with 400 `request.invalidArgument` (Hummingbird's own errors carry no
/// code).
struct BodyDecoder: Sendable {
    let maxBytes: Int

    func decode<Body: Decodable & Sendable>(_ request: Request, as _: Body.Type) async throws -> Body {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > maxBytes {
            throw tooLarge
        }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxBytes)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        }
        do {
            return try JSONDecoder().decode(Body.self, from: Data(buffer.readableBytesView))
        } catch {
            throw HTTPRequestError(.invalidArgument, "The body is not the expected JSON: \(Self.describe(error)).")
        }
    }

    private var tooLarge: HTTPRequestError {
        HTTPRequestError(.requestTooLarge, "The body exceeds \(maxBytes) bytes.", status: .contentTooLarge)
    }

    /// Which field was wrong, without quoting the body.
    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "missing field '\(key.stringValue)'"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "field '\(FrameRejection.path(context.codingPath))' has the wrong type"
        default: "not a JSON object of the expected shape"
        }
    }
}

/// The body of `POST /v1/conversations/{id}/reads`.
struct AppReadsBody: Decodable {
    let accounts: [AccountID]
    let seq: Seq
}

/// The body of `GET /v1/accounts/{id}/push-tokens`.
struct PushTokensBody: Encodable {
    let tokens: [PushToken]
}

/// The body of `POST /v1/accounts`.
struct AccountsBody: Decodable {
    static let maxCount = 1000
    let accounts: [AccountID]
}

/// The body of `POST /v1/conversations/{id}/recall`.
struct AppRecallBody: Decodable {
    let messageID: MessageID
    let mode: RecallMode?
    let postscript: String?
    let ext: String?
    let pushText: String?
    let pushPayload: String?
    let countsAsUnread: Bool?

    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case mode, postscript, ext, pushText, pushPayload, countsAsUnread
    }
}

/// Checks `Authorization: Bearer APP_SECRET` in constant time.
struct AppSecretCheck: Sendable {
    let secret: AppSecret

    func require(_ request: Request) throws {
        let expected = Array("Bearer \(secret.value)".utf8)
        let given = Array((request.headers[.authorization] ?? "").utf8)
        let difference = zip(given, expected).reduce(given.count ^ expected.count) { $0 | Int($1.0 ^ $1.1) }
        guard difference == 0 else {
            throw HTTPRequestError(
                .authInvalidSecret,
                "The REST API needs 'Authorization: Bearer APP_SECRET'.",
                status: .unauthorized
            )
        }
    }
}

/// Gives every REST failure the REST error body with a stable code, including Hummingbird's own (an unknown path, a
/// body over the limit) and unexpected errors (`internal`, status 500).
struct CodedErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    // `@concurrent`: the protocol was declared without NonisolatedNonsendingByDefault.
    @concurrent func handle(
        _ request: Request,
        context: Context,
        next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPRequestError {
            throw error
        } catch let error as any HTTPResponseError {
            throw HTTPRequestError(Self.code(for: error.status), "\(error.status.reasonPhrase).", status: error.status)
        } catch {
            context.logger.error("REST request failed", metadata: ["error.type": "\(type(of: error))"])
            throw HTTPRequestError(.internal, "The server failed; nothing was written.", status: .internalServerError)
        }
    }

    static func code(for status: HTTPResponse.Status) -> ErrorCode {
        switch status {
        case .notFound: .requestNotFound
        case .methodNotAllowed: .requestMethodNotAllowed
        case .contentTooLarge: .requestTooLarge
        case .unauthorized: .authInvalidSecret
        case _ where status.code >= 500: .internal
        default: .invalidArgument
        }
    }
}

/// A REST error: `{"error": {"code": "…", "message": "…"}}` with a matching HTTP status.
struct HTTPRequestError: HTTPResponseError {
    let error: WireError
    let status: HTTPResponse.Status

    init(_ code: ErrorCode, _ message: String, status: HTTPResponse.Status = .badRequest) {
        self.error = WireError(code: code, message: message)
        self.status = status
    }

    init(_ error: RequestError) {
        self.init(error.code, error.message, status: error.code == .internal ? .internalServerError : .badRequest)
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = try JSONEncoder().encode(ErrorBody(error: error))
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: .init(bytes: data))
        )
    }
}

/// The JSON body of a REST error.
struct ErrorBody: Encodable {
    let error: WireError
}
