// Courier — Apache-2.0
internal import CourierAPI
package import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Foundation
package import Hummingbird
package import Logging
internal import NIOCore
internal import OpenAPIHummingbird
internal import OpenAPIRuntime
package import CourierServerCore
package import CourierWebhooks
package import CourierMedia

/// The HTTP side: health, and the REST API for the app's own backend (authorized by the app secret, never by a
/// client token).
package enum RESTRoutes {
    package static func router(
        store: any CourierStore,
        services: CourierServices,
        access: RESTAccess,
        metrics: ServerMetrics,
        registry: ConnectionRegistry,
        bus: any EventBus,
        changeFeed: (any ChangeFeed)?,
        tokens: TokenAuthority,
        signingKeys: SigningKeyRing,
        webhooks: CourierServerConfiguration.Webhooks,
        dispatcher: WebhookDispatcher,
        media: MediaService?,
        maxBodyBytes: Int,
        settings: @escaping @Sendable () -> [(name: String, value: String)],
        logLevel: LogLevelControl,
        staticFiles: [StaticFile],
        now: @escaping @Sendable () -> Timestamp,
        logger: Logger
    ) -> Router<CourierRequestContext> {
        let api_ = RESTAPI(
            store: store,
            messages: services.messages,
            groups: services.groups,
            reads: services.reads,
            typing: services.typing,
            profiles: services.profiles,
            recalls: services.recalls,
            edits: services.edits,
            reactions: services.reactions,
            registry: registry,
            tokens: tokens,
            signingKeys: signingKeys,
            credentials: access.credentials,
            bus: bus,
            webhooks: webhooks,
            dispatcher: dispatcher,
            settings: settings,
            logLevel: logLevel,
            now: now
        )
        let router = Router(context: CourierRequestContext.self)
        // Outermost: the request id on every answer, one line per API request at info with its status and latency
        // (never a header or a body), every 5xx at error with its cause, and the HTTP metrics.
        router.add(middleware: RequestLogMiddleware(metrics: metrics))
        let allowed = AllowedMethods()
        router.add(middleware: CodedErrorMiddleware(allowed: allowed))
        let api = router.group()
        // Liveness: the process answers (`/health` is the same, for the probes configured before readiness existed).
        // `HEAD` answers the same status without the body, for balancers that probe with it.
        for path in ["/health", "/health/live"] {
            for method in [HTTPRequest.Method.get, .head] {
                router.on(RouterPath(path), method: method) { _, _ in
                    Response(
                        status: .ok,
                        headers: [.contentType: "application/json"],
                        body: method == .head ? .init() : .init(byteBuffer: .init(string: #"{"status":"ok"}"#))
                    )
                }
            }
        }
        // Readiness: the store commits a write now (a real one, synced like any other) and, on PostgreSQL, other
        // nodes' changes reach this one. A load balancer sends devices elsewhere while it answers 503.
        let readiness = Readiness(logger: logger)
        for method in [HTTPRequest.Method.get, .head] {
            router.on("/health/ready", method: method) { _, _ -> Response in
                let report = await readiness.check(store: store, changeFeed: changeFeed)
                return Response(
                    status: report.ready ? .ok : .serviceUnavailable,
                    headers: [.contentType: "application/json"],
                    body: method == .head ? .init() : .init(byteBuffer: .init(string: report.json))
                )
            }
        }
        // Prometheus text exposition (docs/operations.md): the app secret or a key with the `metrics` scope.
        api.group().add(middleware: CallerMiddleware(access: access)).get("/metrics") { _, _ -> Response in
            try await access.perform("getMetrics", target: "", call: try RESTCall.required(), status: { $0.status.code }) {
                // The webhook backlog as it is now (counted at each scrape, like the outbound queues: a count kept by
                // the dispatcher every few seconds read 0 for a while after deliveries were recorded).
                if let pending = try? await store.pendingWebhookDeliveries() { metrics.webhookBacklog(pending) }
                metrics.store(store.connectionStatistics)
                return Response(
                    status: .ok,
                    headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: .init(bytes: metrics.exposition(queues: registry.outboundQueues)))
                )
            }
        }
        // The API itself, generated from openapi.yaml: every operation behind a credential (the app secret or a key
        // with a scope the operation's `security` names) and the body limit, audited (ADR 0048).
        let v1 = api.group().add(middleware: CallerMiddleware(access: access))
        // Compact JSON (the runtime pretty-prints by default). Only fails for a path the generator wrote malformed.
        try! api_.registerHandlers(
            on: v1,
            configuration: .init(jsonEncodingOptions: [.sortedKeys, .withoutEscapingSlashes]),
            middlewares: [OperationAccessMiddleware(access: access, maxBodyBytes: maxBodyBytes)]
        )
        // Files (docs/media.md): the app with its credential, devices with their tokens.
        if let media { MediaRoutes.add(to: api, media: media, access: access, tokens: tokens, store: store) }
        // The web console (docs/console.md): static files that load without the secret; every call they make needs it.
        for file in staticFiles {
            router.get(RouterPath(file.path)) { _, _ in
                Response(status: .ok, headers: file.headers, body: .init(byteBuffer: .init(bytes: file.bytes)))
            }
        }
        // The document itself, for generators and verifiers (no secret: it describes the API, it grants nothing).
        router.get("/v1/openapi.yaml") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: .init(bytes: CourierAPIDocument.yaml))
            )
        }
        allowed.set(router.routes.map { ($0.path, $0.method) })
        return router
    }
}

/// A file served as it is (the console's, which the server module holds as its resources).
package struct StaticFile: Sendable {
    package let path: String
    package let bytes: [UInt8]
    package let headers: HTTPFields

    package init(path: String, bytes: [UInt8], headers: HTTPFields) {
        self.path = path
        self.bytes = bytes
        self.headers = headers
    }
}

/// The methods each route takes, for a request no route matched: a path that exists with other methods answers 405
/// `request.methodNotAllowed` with `Allow`, not 404.
final class AllowedMethods: Sendable {
    private let routes = Locked<[(path: RouterPath, method: HTTPRequest.Method)]>([])

    func set(_ routes: [(RouterPath, HTTPRequest.Method)]) { self.routes.withLock { $0 = routes.map { ($0, $1) } } }

    /// The methods of the routes whose template matches `path`, sorted; empty when none does.
    func methods(for path: String) -> [String] {
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        let matching = routes.withLock { routes in
            routes.filter { route in
                route.path.count == components.count && zip(route.path, components).allSatisfy { $0 ~= $1 }
            }
        }
        return Set(matching.map(\.method.rawValue)).sorted()
    }
}

/// What `GET /health/ready` finds: the store's write probe and the change feed. A change of state is logged once
/// (at warning with its cause when the node stops being ready, at info when it is again), not every probe.
///
/// The probe is a synced write, and the endpoint needs no secret: probes that arrive while a check runs share its
/// answer, so a burst of probes costs one write at a time, not one each. (An answer is never reused later: a probe
/// after the disk filled up, or freed, must see it.)
final class Readiness: Sendable {
    struct Report: Sendable {
        let ready: Bool
        let json: String
    }

    private struct State {
        var lastReady: Bool?
        /// A probe is under way; these callers wait for its report.
        var probing = false
        var waiters: [CheckedContinuation<Report, Never>] = []
        var lastReport: Report?
    }

    private let logger: Logger
    private let state = Locked(State())
    init(logger: Logger) { self.logger = logger }

    /// Probes once for everyone who asks meanwhile: the first caller runs the probe, the others get its report.
    func check(store: any CourierStore, changeFeed: (any ChangeFeed)?) async -> Report {
        let leads = state.withLock { state -> Bool in
            if state.probing { return false }
            state.probing = true
            return true
        }
        guard leads else {
            return await withCheckedContinuation { continuation in
                let done = state.withLock { state -> Report? in
                    if state.probing {
                        state.waiters.append(continuation)
                        return nil
                    }
                    return state.lastReport
                }
                if let done { continuation.resume(returning: done) }
            }
        }
        let report = await probe(store: store, changeFeed: changeFeed)
        let waiters = state.withLock { state in
            state.probing = false
            state.lastReport = report
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: report) }
        return report
    }

    private func probe(store: any CourierStore, changeFeed: (any ChangeFeed)?) async -> Report {
        var failure: String?
        do {
            try await store.checkWritable()
        } catch {
            failure = "\(error)"
        }
        let feed = changeFeed.map { $0.isListening ? "listening" : "disconnected" } ?? "none"
        let ready = failure == nil && feed != "disconnected"
        let storeState = failure == nil ? "writable" : "unavailable"
        let report = Report(
            ready: ready,
            json: #"{"changeFeed":"\#(feed)","status":"\#(ready ? "ready" : "unavailable")","store":"\#(storeState)"}"#
        )
        let before = state.withLock { state in
            defer { state.lastReady = ready }
            return state.lastReady
        }
        if before != ready {
            if ready {
                logger.info("Ready: the store commits and the change feed listens", metadata: ["changeFeed": "\(feed)"])
            } else {
                logger.warning("Not ready", metadata: ["store": "\(failure ?? "writable")", "changeFeed": "\(feed)"])
            }
        }
        return report
    }
}

/// Gives every REST failure a problem with a stable code, including Hummingbird's own (an unknown path, a body over
/// the limit), the generated layer's (a body, parameter or content type that does not match the document: 400
/// `request.invalidArgument`) and unexpected errors (`internal`, status 500).
struct CodedErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowed: AllowedMethods

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
        } catch let error as ServerError {
            if let coded = error.underlyingError as? HTTPRequestError { throw coded }
            // The request did not become the operation's input: it does not match the document.
            if error.operationInput == nil {
                throw HTTPRequestError(
                    .invalidArgument,
                    "The request does not match the API document: \(Self.describe(error.underlyingError))."
                )
            }
            throw HTTPRequestError(
                .internal,
                "The server failed; nothing was written.",
                status: .internalServerError,
                cause: "\(error.operationID): \(String(reflecting: error.underlyingError).prefix(500))"
            )
        } catch let error as any HTTPResponseError {
            // No route matched: a path that exists with other methods is 405, with what it takes.
            if error.status == .notFound, context.endpointPath == nil || context.endpointPath == "NotFound" {
                let methods = allowed.methods(for: request.uri.path)
                if !methods.isEmpty {
                    throw HTTPRequestError(
                        .requestMethodNotAllowed,
                        "\(request.uri.path) takes \(methods.joined(separator: ", ")), not \(request.method).",
                        status: .methodNotAllowed,
                        allow: methods
                    )
                }
            }
            throw HTTPRequestError(Self.code(for: error.status), "\(error.status.reasonPhrase).", status: error.status)
        } catch {
            throw HTTPRequestError(
                .internal,
                "The server failed; nothing was written.",
                status: .internalServerError,
                cause: String(reflecting: error).prefix(500).description
            )
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

    /// Which field or part was wrong, without quoting the request.
    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            "missing field '\(FrameRejection.path(context.codingPath + [key]))'"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "field '\(FrameRejection.path(context.codingPath))' has the wrong type"
        case DecodingError.dataCorrupted(let context)
        where context.debugDescription.hasPrefix("Additional properties are disabled") && !context.codingPath.isEmpty:
            // A field the operation does not take (a typo, or a field of another operation): refused rather than
            // ignored, so a request never seems to have done what it did not.
            "unknown field '\(FrameRejection.path(context.codingPath))'"
        case DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty:
            "field '\(FrameRejection.path(context.codingPath))' has a value the API does not allow"
        case DecodingError.dataCorrupted:
            "the body is not JSON"
        default:
            // The runtime's own errors name the parameter or content type, never a value.
            String(describing: error).prefix(200).description
        }
    }
}
