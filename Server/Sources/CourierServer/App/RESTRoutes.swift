// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import Hummingbird

/// The HTTP side: health, and the REST API for the app's own backend (authorized by the app secret, never by a
/// client token).
enum RESTRoutes {
    static func router(
        store: any CourierStore,
        secret: AppSecret,
        now: @escaping @Sendable () -> Timestamp
    ) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/health") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: .init(string: #"{"status":"ok"}"#))
            )
        }
        let check = AppSecretCheck(secret: secret)
        router.put("/v1/accounts/:account") { request, context -> Response in
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
        return router
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
