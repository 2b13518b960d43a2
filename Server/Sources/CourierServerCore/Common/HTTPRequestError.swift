// Courier — Apache-2.0
public import CourierWire
internal import Foundation
package import Hummingbird
internal import NIOCore
internal import OpenAPIRuntime

/// A REST failure: an RFC 9457 problem (`application/problem+json`) with Courier's stable `code`, the HTTP status
/// the code calls for, and a sentence for people in `detail`.
package struct HTTPRequestError: HTTPResponseError {
    let error: WireError
    package let status: HTTPResponse.Status
    /// What failed inside the server (a 5xx): logged with the request, never sent.
    let cause: String?
    /// The methods the path takes (a 405's `Allow`).
    let allow: [String]
    /// When to ask again (a 429's `Retry-After`, in whole seconds).
    let retryAfter: Duration?

    package init(
        _ code: ErrorCode,
        _ message: String,
        status: HTTPResponse.Status = .badRequest,
        cause: String? = nil,
        allow: [String] = [],
        retryAfter: Duration? = nil
    ) {
        self.error = WireError(code: code, message: message)
        self.status = status
        self.cause = cause
        self.allow = allow
        self.retryAfter = retryAfter
    }

    package init(_ error: RequestError) {
        self.init(error.code, error.message, status: Self.status(for: error.code), cause: error.cause)
    }

    static func status(for code: ErrorCode) -> HTTPResponse.Status {
        let number = RESTStatus.of(code)
        return Self.statuses.first { $0.code == number } ?? HTTPResponse.Status(code: number)
    }

    /// The statuses a problem may have, with their reason phrases (a status made from its number alone has none, and
    /// the problem's `title` is the reason phrase).
    static let statuses: [HTTPResponse.Status] = [
        .badRequest, .unauthorized, .forbidden, .notFound, .methodNotAllowed, .notAcceptable, .requestTimeout,
        .conflict, .gone, .contentTooLarge, .unsupportedMediaType, .unprocessableContent, .tooManyRequests,
        .internalServerError, .notImplemented, .serviceUnavailable, .gatewayTimeout,
    ]

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        let problem = Problem(
            type: "urn:courier:error:\(error.code.rawValue)",
            title: status.reasonPhrase,
            status: status.code,
            code: error.code,
            detail: error.message
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var response = Response(
            status: status,
            headers: [.contentType: "application/problem+json"],
            body: .init(byteBuffer: .init(bytes: try encoder.encode(problem)))
        )
        if !allow.isEmpty { response.headers[.allow] = allow.joined(separator: ", ") }
        // The database cannot be reached: a retry in a moment may succeed.
        if status == .serviceUnavailable { response.headers[.retryAfter] = "1" }
        if let retryAfter { response.headers[.retryAfter] = "\((retryAfter.roundedUpMilliseconds + 999) / 1000)" }
        return response
    }
}

/// The body of a REST failure (RFC 9457 with a `code` member).
struct Problem: Codable {
    let type: String
    let title: String
    let status: Int
    let code: ErrorCode
    let detail: String
}

/// The HTTP status of each error code on the REST API: missing things 404, a role or policy that forbids 403, a state
/// that conflicts 409. docs/protocol.md §8 has the same table, and `RESTStatusTableTests` checks that they agree.
public enum RESTStatus {
    public static func of(_ code: ErrorCode) -> Int {
        switch code {
        case .internal: 500
        case .storeUnavailable: 503
        case .accountNotFound, .conversationNotFound, .messageNotFound, .groupNotFound, .messageNotInConversation,
            .requestNotFound, .mediaNotFound:
            404
        case .conversationNotAMember, .groupNotPermitted, .recallNotPermitted, .recallWindowExpired,
            .editNotPermitted, .editWindowExpired, .receiptFixedByPolicy, .receiptNotPermitted, .authScopeMissing:
            403
        case .keyNotFound: 404
        case .keyLastSigningKey: 409
        case .rateLimited, .authThrottled: 429
        case .groupAlreadyExists, .recallAlreadyRecalled, .editRecalled, .reactionMessageRecalled,
            .reactionTooMany, .receiptAlreadyRequested, .groupAlreadyMember,
            .accountDeactivated:
            409
        case .requestMethodNotAllowed: 405
        case .requestTooLarge, .mediaTooLarge: 413
        case .mediaTypeNotAllowed: 415
        case .authInvalidSecret, .authInvalidToken, .authTokenRevoked, .authAccountDeactivated: 401
        default: 400
        }
    }
}
