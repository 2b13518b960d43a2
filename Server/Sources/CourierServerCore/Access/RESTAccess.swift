// Courier — Apache-2.0
internal import CourierDomain
package import CourierStorage
package import CourierWire
internal import Foundation
internal import HTTPTypes
package import Hummingbird
package import Logging
internal import NIOCore
internal import OpenAPIRuntime

/// Who may call what on the REST API, and the record of what they did (ADR 0048): the caller is told from the
/// `Authorization` header (the app secret, or an API key), an address that keeps sending wrong ones is refused, each
/// credential has its rate, an operation outside the key's scopes is refused, and every administrative operation
/// leaves its row in the audit trail.
package final class RESTAccess: Sendable {
    package let credentials: Credentials
    /// Read from the document at the first REST call, not at start: a node that restarts serves devices without it.
    var policy: OperationPolicy { customPolicy ?? .document }
    private let customPolicy: OperationPolicy?
    private let store: any CredentialStore
    private let throttle: ConnectThrottle
    private let limiter: RateLimiter<String>
    private let trustedProxies: TrustedProxies
    private let now: @Sendable () -> Timestamp
    private let logger: Logger

    package init(
        credentials: Credentials,
        policy: OperationPolicy? = nil,
        store: any CredentialStore,
        throttle: ConnectThrottle,
        requestsPerSecond: Int,
        trustedProxies: TrustedProxies,
        now: @escaping @Sendable () -> Timestamp,
        logger: Logger
    ) {
        self.credentials = credentials
        self.customPolicy = policy
        self.store = store
        self.throttle = throttle
        self.limiter = RateLimiter(perSecond: requestsPerSecond)
        self.trustedProxies = trustedProxies
        self.now = now
        self.logger = logger
    }

    /// The caller of `request`, which came from `peer`.
    ///
    /// - Throws: 429 `auth.throttled` for an address past the failed-connect limit (its credential unread); 401
    ///   `auth.invalidSecret` for a wrong credential, counted against the address; 429 `rate.limited` for a
    ///   credential past its rate.
    package func authenticate(_ request: Request, peer: String?, requestID: String) async throws -> RESTCall {
        let address = trustedProxies.client(
            peer: peer,
            headers: request.headers.map { (name: $0.name.canonicalName, value: $0.value) }
        )
        let counted = address ?? "unknown"
        if throttle.isThrottled(counted) {
            throw HTTPRequestError(
                .authThrottled,
                "Too many requests with a wrong credential came from this address lately.",
                status: .tooManyRequests,
                retryAfter: .seconds(60)
            )
        }
        let caller: Caller
        do {
            caller = try await credentials.caller(authorization: request.headers[.authorization])
        } catch let error as HTTPRequestError where error.status == .unauthorized {
            let failures = throttle.recordFailure(counted)
            if failures <= ConnectThrottle.loggedFailuresPerMinute {
                logger.warning(
                    "REST credential refused",
                    metadata: ["courier.client": "\(counted)", "hb.request.path": "\(request.uri.path)", "hb.request.id": "\(requestID)"]
                )
            }
            throw error
        }
        if let wait = limiter.take(caller.credential, at: .now) {
            throw HTTPRequestError(
                .rateLimited,
                "This credential made more than \(limiter.perSecond) requests a second: ask again after Retry-After.",
                status: .tooManyRequests,
                retryAfter: wait
            )
        }
        return RESTCall(caller: caller, clientAddress: address, requestID: requestID)
    }

    /// Runs `operationID` for `call`: refused 403 `auth.scopeMissing` outside the key's scopes; an audited operation
    /// runs with its entry set (``AuditTrail``), so that its first write transaction writes the row, and the row gets
    /// the status answered before the answer goes out. For an action that wrote nothing that is its only record: the
    /// answer waits for it, and is 503 `store.unavailable` without it.
    package func perform<T>(
        _ operationID: String,
        target: String,
        call: RESTCall,
        status: (T) -> Int,
        _ body: () async throws -> T
    ) async throws -> T {
        let audited = policy.isAudited(operationID)
        let entry = AuditEntry(
            id: UUID().uuidString.lowercased(),
            at: now(),
            credential: call.caller.credential,
            action: operationID,
            target: target,
            requestID: call.requestID,
            clientAddress: call.clientAddress
        )
        guard policy.allows(call.caller, operationID) else {
            let names = policy.scopes(of: operationID).map(\.rawValue)
            let refusal = HTTPRequestError(
                .authScopeMissing,
                names.isEmpty
                    ? "\(operationID) needs the app secret."
                    : "\(operationID) needs a key with the scope \(names.joined(separator: " or ")).",
                status: .forbidden
            )
            if audited { await record(entry, status: 403, code: refusal.error.code.rawValue) }
            throw refusal
        }
        guard audited else { return try await body() }
        let result: T
        do {
            result = try await AuditTrail.$entry.withValue(entry) { try await body() }
        } catch {
            entry.close()
            let (answered, code) = Self.outcome(of: error)
            await record(entry, status: answered, code: code)
            throw error
        }
        entry.close()
        do {
            try await store.recordAudit(entry, status: status(result), code: nil)
        } catch {
            // The action's own transaction wrote its row: it says the action committed, without the status.
            logger.error(
                "An audit row's status could not be written",
                metadata: ["action": "\(entry.action)", "hb.request.id": "\(entry.requestID)", "error": "\(error)"]
            )
            if !entry.isRecorded { throw HTTPRequestError(RequestError(error)) }
        }
        return result
    }

    private func record(_ entry: AuditEntry, status: Int, code: String?) async {
        do {
            try await store.recordAudit(entry, status: status, code: code)
        } catch {
            logger.error(
                "An audit row could not be written",
                metadata: ["action": "\(entry.action)", "hb.request.id": "\(entry.requestID)", "error": "\(error)"]
            )
        }
    }

    /// The status and code an error is answered with (as ``CodedErrorMiddleware`` makes it).
    static func outcome(of error: any Error) -> (status: Int, code: String?) {
        switch error {
        case let error as HTTPRequestError:
            return (error.status.code, error.error.code.rawValue)
        case let error as ServerError:
            if let coded = error.underlyingError as? HTTPRequestError { return outcome(of: coded) }
            return error.operationInput == nil
                ? (400, ErrorCode.invalidArgument.rawValue) : (500, ErrorCode.internal.rawValue)
        case let error as any HTTPResponseError:
            return (error.status.code, nil)
        default:
            return (500, ErrorCode.internal.rawValue)
        }
    }

    /// An operation's path parameters as its audit row's target: `account=alice`, sorted by name.
    static func target(_ parameters: [String: Substring]) -> String {
        parameters.sorted { $0.key < $1.key }
            .map { "\($0.key)=\(String($0.value).removingPercentEncoding ?? String($0.value))" }
            .joined(separator: ",")
    }
}

/// The request context of Courier's HTTP routes: Hummingbird's, with the TCP peer's address (the client's, or a
/// proxy's: ``TrustedProxies`` tells).
package struct CourierRequestContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let remoteAddress: SocketAddress?

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Tells who calls before anything else of the request is read, and runs the rest with ``RESTCall/current`` set.
package struct CallerMiddleware: RouterMiddleware {
    package typealias Context = CourierRequestContext
    let access: RESTAccess

    package init(access: RESTAccess) {
        self.access = access
    }

    @concurrent package func handle(
        _ request: Request,
        context: Context,
        next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let call = try await access.authenticate(request, peer: context.remoteAddress?.ipAddress, requestID: context.id)
        return try await RESTCall.$current.withValue(call) { try await next(request, context) }
    }
}

/// Each generated operation as the document allows its caller, audited (``RESTAccess/perform(_:target:call:status:_:)``).
package struct OperationAccessMiddleware: ServerMiddleware {
    let access: RESTAccess
    /// The body limit (`--max-rest-body-bytes`): a body is read only once the caller may call the operation.
    let maxBodyBytes: Int

    package init(access: RESTAccess, maxBodyBytes: Int) {
        self.access = access
        self.maxBodyBytes = maxBodyBytes
    }

    // `@concurrent`: the protocol was declared without NonisolatedNonsendingByDefault.
    @concurrent func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        metadata: ServerRequestMetadata,
        operationID: String,
        next: @concurrent @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let call = try RESTCall.required(by: operationID)
        return try await access.perform(
            operationID,
            target: RESTAccess.target(metadata.pathParameters),
            call: call,
            status: { Int($0.0.status.code) }
        ) {
            try await next(request, try await collected(body, request), metadata)
        }
    }

    /// The body read up to the limit: 413 `request.tooLarge` over it, whatever its framing (a `Content-Length` over
    /// it is refused unread).
    private func collected(_ body: HTTPBody?, _ request: HTTPRequest) async throws -> HTTPBody? {
        guard let body else { return nil }
        let tooLarge = HTTPRequestError(.requestTooLarge, "The body exceeds \(maxBodyBytes) bytes.", status: .contentTooLarge)
        if let length = request.headerFields[.contentLength].flatMap({ Int($0) }), length > maxBodyBytes { throw tooLarge }
        var bytes: [UInt8] = []
        for try await chunk in body {
            guard bytes.count + chunk.count <= maxBodyBytes else { throw tooLarge }
            bytes += chunk
        }
        return HTTPBody(bytes)
    }
}
