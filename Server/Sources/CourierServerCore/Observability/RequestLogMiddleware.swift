// Courier — Apache-2.0
package import Hummingbird
internal import Logging

/// Every HTTP request, seen from outside everything else: its id in `X-Request-Id` on every answer (the caller's own
/// id when it sent a usable one, so a proxy's id follows the request into the log), one line at info with the status
/// and the latency (health probes and the console's files only when they fail: they come every few seconds), every 5xx
/// at error with its cause and route, and the HTTP metrics by route and status.
package struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    package init(metrics: ServerMetrics) {
        self.metrics = metrics
    }

    // `@concurrent`: the protocol was declared without NonisolatedNonsendingByDefault.
    @concurrent package func handle(
        _ request: Request,
        context: Context,
        next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        if let given = request.headers[.init("X-Request-Id")!], Self.usable(given) {
            context.logger[metadataKey: "hb.request.id"] = .string(given)
        }
        let id = context.id
        let started = ContinuousClock.now
        var response: Response
        var cause: String?
        do {
            response = try await next(request, context)
        } catch let error as HTTPRequestError {
            response = try error.response(from: request, context: context)
            cause = error.cause
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.init("X-Request-Id")!] = id
        let took = ContinuousClock.now - started
        // Hummingbird names the path of a request no route matched `NotFound`.
        let route = context.endpointPath.flatMap { $0 == "NotFound" ? nil : $0 } ?? "unmatched"
        let status = Int(response.status.code)
        metrics.httpRequest(method: request.method.rawValue, route: route, status: status, took: took)
        // The API and the metrics are logged; health probes and the console's static files are not.
        let path = request.uri.path
        let quiet = path.hasPrefix("/health") || (route != "unmatched" && !path.hasPrefix("/v1/") && path != "/metrics")
        var metadata: Logger.Metadata = [
            "hb.request.method": "\(request.method)", "hb.request.path": "\(path)", "http.route": "\(route)",
            "http.response.status_code": .stringConvertible(status),
            "courier.duration.ms": .stringConvertible(took.fractionalMilliseconds),
        ]
        // A readiness probe's 503 is its answer, not a failure: the node logs its changes of state itself.
        if status >= 500 && !path.hasPrefix("/health") {
            metadata["error"] = "\(cause ?? "none given")"
            context.logger.error("Request failed", metadata: metadata)
        } else if !quiet {
            context.logger.info("Request", metadata: metadata)
        }
        return response
    }

    /// 1–128 characters of `[A-Za-z0-9._:-]`: safe in a log line and a header.
    static func usable(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                    UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}
