// Courier — Apache-2.0
package import Foundation
internal import NIOCore
internal import NIOHTTP1
internal import NIOPosix
internal import NIOSSL
internal import Synchronization

/// One webhook request, signed and ready to write.
struct WebhookRequest: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer
    /// Whether a request that is not accepted ends its queue (it is retried later and the rest wait behind it); one
    /// past its retry period is failed for good and the next goes on.
    let endsQueueIfRefused: Bool
}

/// What an endpoint answered to one request, or why there was no answer.
enum WebhookAnswer: Sendable, Hashable {
    case status(Int)
    case failed(String)

    var isAccepted: Bool {
        if case .status(let code) = self { return (200..<300).contains(code) }
        return false
    }
}

/// Posts webhook requests on kept-alive HTTP/1.1 connections of its own, all on one event loop (ADR 0030's cheaper
/// path): a batch's queues go out side by side, each queue's requests one after the other on one connection, chained
/// by the event loop — no task and no hop per request; the caller is resumed once per batch. `https` endpoints are
/// reached over TLS (the system's trust roots); redirects are not followed. A new connection is checked against the
/// address policy once connected, before anything is written on it: one that reached an address the
/// policy refuses is closed and its attempt fails with the reason.
package final class WebhookHTTP: Sendable {
    let eventLoop: any EventLoop
    let attemptTimeout: TimeAmount
    /// Which addresses a connection may reach.
    let addressPolicy: WebhookAddressPolicy
    /// How long a connection waits for the next request before it is closed: by default under the keep-alive timeouts
    /// servers commonly use (5 s for Node.js), so a request is rarely written on a connection the endpoint is closing.
    private let idleTimeout: TimeAmount
    private let maxIdlePerOrigin: Int
    private let tls: NIOSSLContext?
    /// Connections waiting for a request, with when each was put back.
    private let idle: NIOLoopBoundBox<[Origin: [(channel: any Channel, since: NIODeadline)]]>

    package struct Origin: Hashable {
        let isTLS: Bool
        package let host: String
        let port: Int
    }

    init(
        attemptTimeout: TimeAmount,
        maxIdlePerOrigin: Int,
        idleTimeout: TimeAmount = .seconds(4),
        addressPolicy: WebhookAddressPolicy,
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        self.eventLoop = eventLoop
        self.attemptTimeout = attemptTimeout
        self.addressPolicy = addressPolicy
        self.idleTimeout = idleTimeout
        self.maxIdlePerOrigin = maxIdlePerOrigin
        tls = try? NIOSSLContext(configuration: .makeClientConfiguration())
        idle = NIOLoopBoundBox.makeBoxSendingValue(
            [:], as: [Origin: [(channel: any Channel, since: NIODeadline)]].self, eventLoop: eventLoop
        )
    }

    /// The origin and the request target of `url`; `nil` when it is not an `http` or `https` URL with a host.
    package static func target(of url: URL) -> (origin: Origin, path: String, host: String)? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else { return nil }
        let isTLS = scheme == "https"
        let port = components.port ?? (isTLS ? 443 : 80)
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (components.port.map { ":\($0)" } ?? "")
        return (Origin(isTLS: isTLS, host: host, port: port), path, hostHeader)
    }

    /// Sends `queues` to `origin`, at most `parallel` at once, each in order until a request that ends its queue is
    /// not accepted, or until the next could not be answered before `deadline`. Answers, per queue, the requests it
    /// attempted. A cancelled caller closes the connections under way; their requests count as failed.
    /// - Parameter mayDefer: Whether a queue's first request may be left unsent for want of time (a stream's batch);
    ///   `false` when the caller decided that it starts (its timeout is still bounded by `deadline`).
    func send(
        _ queues: [[WebhookRequest]],
        to origin: Origin,
        parallel: Int,
        deadline: NIODeadline,
        mayDefer: Bool = true
    ) async -> [[WebhookAnswer]] {
        guard !queues.isEmpty, !Task.isCancelled else { return queues.map { _ in [] } }
        let promise = eventLoop.makePromise(of: [[WebhookAnswer]].self)
        let box = NIOLoopBoundBox.makeEmptyBox(valueType: Batch.self, eventLoop: eventLoop)
        let cancelled = CancelFlag()
        return await withTaskCancellationHandler {
            eventLoop.execute {
                // Cancelled before the batch was made: nothing is sent.
                guard !cancelled.value.load(ordering: .acquiring) else {
                    promise.succeed(queues.map { _ in [] })
                    return
                }
                let batch = Batch(
                    client: self, origin: origin, queues: queues, parallel: max(1, parallel), deadline: deadline,
                    mayDefer: mayDefer, promise: promise
                )
                box.value = batch
                batch.pump()
            }
            return (try? await promise.futureResult.get()) ?? queues.map { _ in [] }
        } onCancel: {
            cancelled.value.store(true, ordering: .releasing)
            eventLoop.execute { box.value?.cancel() }
        }
    }

    /// Closes the idle connections.
    func shutdown() async {
        try? await eventLoop.submit {
            for (channel, _) in self.idle.value.values.joined() { channel.close(promise: nil) }
            self.idle.value = [:]
        }.get()
    }

    // MARK: On the event loop

    /// An idle connection to `origin`, or a new one made before `deadline`; `reused` when it carried a request before.
    func connection(to origin: Origin, before deadline: NIODeadline) -> EventLoopFuture<(any Channel, reused: Bool)> {
        eventLoop.assertInEventLoop()
        pruneIdle()
        if let (channel, _) = idle.value[origin]?.popLast() {
            return eventLoop.makeSucceededFuture((channel, true))
        }
        let tls = origin.isTLS ? self.tls : nil
        if origin.isTLS && tls == nil {
            return eventLoop.makeFailedFuture(WebhookHTTPError("TLS is not available on this server."))
        }
        let policy = addressPolicy
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(max(.zero, deadline - .now()))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // First: a connection to a refused address never becomes active for the handlers behind it (no
                    // TLS hello goes out) and is closed below.
                    try channel.pipeline.syncOperations.addHandler(
                        WebhookAddressGuard(policy: policy, host: origin.host)
                    )
                    if let tls {
                        let isAddress = origin.host.contains(":") || origin.host.allSatisfy { $0.isNumber || $0 == "." }
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : origin.host)
                        )
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(AnswerHandler())
                }
            }
            .connect(host: origin.host, port: origin.port)
            .flatMapThrowing { channel in
                // The address the name resolved to now, not when the endpoint was created (DNS rebinding).
                if let refusal = policy.refusal(ofConnectionTo: channel.remoteAddress, host: origin.host) {
                    channel.close(promise: nil)
                    throw WebhookHTTPError(refusal)
                }
                return (channel, reused: false)
            }
    }

    /// Closes the connections idle for longer than the idle timeout (or closed by their endpoint).
    private func pruneIdle() {
        let oldest = NIODeadline.now() - idleTimeout
        for (origin, channels) in idle.value {
            let kept = channels.filter { $0.channel.isActive && $0.since > oldest }
            guard kept.count != channels.count else { continue }
            for (channel, since) in channels where since <= oldest { channel.close(promise: nil) }
            idle.value[origin] = kept.isEmpty ? nil : kept
        }
    }

    func release(_ channel: any Channel, to origin: Origin) {
        eventLoop.assertInEventLoop()
        guard channel.isActive, (idle.value[origin]?.count ?? 0) < maxIdlePerOrigin else {
            channel.close(promise: nil)
            return
        }
        idle.value[origin, default: []].append((channel, .now()))
    }

    /// Writes `request` on `channel` and answers what came back, with whether the connection can carry another.
    func exchange(_ request: WebhookRequest, on channel: any Channel, until deadline: NIODeadline)
        -> EventLoopFuture<(WebhookAnswer, Bool)>
    {
        let answered = eventLoop.makePromise(of: (WebhookAnswer, Bool).self)
        guard let handler = try? channel.pipeline.syncOperations.handler(type: AnswerHandler.self) else {
            channel.close(promise: nil)
            answered.succeed((.failed("The connection had no HTTP handler."), false))
            return answered.futureResult
        }
        handler.waiting = answered
        let timeout = eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            handler.finish(.failed(AttemptTimedOut().description), reusable: false)
            channel.close(promise: nil)
        }
        channel.write(HTTPClientRequestPart.head(request.head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(request.body)), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return answered.futureResult.map { answer, reusable in
            timeout.cancel()
            return (answer, reusable && channel.isActive)
        }
    }
}

struct WebhookHTTPError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The first handler of a webhook connection: holds back `channelActive` when the connection reached an address the
/// policy refuses, so that the handlers behind it (TLS's hello) write nothing before
/// ``WebhookHTTP/connection(to:before:)`` closes it.
final class WebhookAddressGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    let policy: WebhookAddressPolicy
    let host: String

    init(policy: WebhookAddressPolicy, host: String) {
        self.policy = policy
        self.host = host
    }

    func channelActive(context: ChannelHandlerContext) {
        // Refused: not passed on; the connection's future closes it with the reason (it normally does so first,
        // while the connect completes, and the connection never becomes active).
        guard policy.refusal(ofConnectionTo: context.channel.remoteAddress, host: host) == nil else { return }
        context.fireChannelActive()
    }
}
