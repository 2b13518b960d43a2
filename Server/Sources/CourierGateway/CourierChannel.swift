// Courier — Apache-2.0
internal import HTTPTypes
internal import Hummingbird
package import HummingbirdCore
package import Logging
internal import NIOCore
internal import NIOHTTP1
internal import NIOHTTPTypes
internal import NIOHTTPTypesHTTP1
internal import NIOWebSocket
package import CourierServerCore

/// Every connection of a node: HTTP/1 for the REST API, the console and the metrics, upgraded to a WebSocket on
/// `/v1/ws` for a device (ADR 0034). HTTP requests go to Hummingbird's responder as in its own HTTP/1 channel. An
/// upgraded connection gets NIOWebSocket's frame codec and the device's ``SessionHandler``, and needs no task of its
/// own: the handler is the session, on the connection's event loop.
///
/// Guarded where Hummingbird has no guard of its own (SPEC §9.9):
/// - until a connection's first request head is complete it has `headTimeout` (bytes that trickle in do not extend
///   it) and `maxHeadBytes`; then it is answered 408 or 431 and closed;
/// - every request's body must be complete within the same time after its head, or the connection is closed (a body
///   that trickles in would otherwise hold the connection: Hummingbird's idle timer restarts on every part);
/// - a request the HTTP parser refuses (a bad version, an HTTP/2 preface, a bad `Content-Length`, too many or too long
///   headers, a bare LF) is answered 400 and closed — Hummingbird only answers parse errors after a first head;
/// - after the upgrade, an unmasked client frame closes the WebSocket with 1002 (RFC 6455 §5.1), frames that break
///   the protocol or pass `maxFrameSize` close it with 1002 or 1009 (NIOWebSocket's error handler), and the server
///   pings every `pingInterval` (``KeepAlive``).
struct CourierChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        /// The connection is a device's session now: its handlers run it.
        case webSocket
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
    }

    /// The WebSocket's path.
    static let path = "/v1/ws"

    let responder: HTTPChannelHandler.Responder
    let http1: HTTP1Channel.Configuration
    let maxFrameSize: Int
    let headTimeout: TimeAmount
    let maxHeadBytes: Int
    let pingInterval: TimeAmount
    /// The session of a connection that upgraded, given its upgrade request's head (the client's address may be in
    /// its headers, from a trusted proxy).
    let session: @Sendable (any Channel, HTTPRequestHead) -> SessionHandler

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            let headGuard = RequestHeadGuard(maxBytes: maxHeadBytes, timeout: headTimeout)
            let observer = RequestHeadObserver(headGuard: headGuard)
            let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let (pingInterval, session, http1) = (self.pingInterval, self.session, self.http1)
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: maxFrameSize,
                shouldUpgrade: { channel, head in
                    upgradeAttempted.value = true
                    let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                    let accepted = head.method == .GET && path == Self.path
                    return channel.eventLoop.makeSucceededFuture(accepted ? HTTPHeaders() : nil)
                },
                upgradePipelineHandler: { channel, head in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        // What follows are WebSocket frames.
                        if let observer = try? pipeline.handler(type: RequestHeadObserver.self) {
                            pipeline.removeHandler(observer, promise: nil)
                        }
                        let decoder = try pipeline.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
                        // Between the encoder and every writer (the session, the pings, NIOWebSocket's error handler).
                        let closeGuard = CloseFrameGuard()
                        try pipeline.addHandler(closeGuard, position: .after(decoder))
                        let masked = RequireMaskedFrames()
                        try pipeline.addHandler(masked, position: .after(closeGuard))
                        try pipeline.addHandler(KeepAlive(interval: pingInterval), position: .after(masked))
                        try pipeline.addHandler(session(channel, head))
                        return UpgradeResult.webSocket
                    }
                }
            )
            let notUpgrading = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try pipeline.addHandlers(http1.additionalChannelHandlers())
                        try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(isOutboundHalfClosureEnabled: true)
                        )
                        return upgradeAttempted.value ? .failedUpgrade(asyncChannel) : .notUpgraded(asyncChannel)
                    }
                }
            )
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(upgradeConfiguration: notUpgrading)
            configuration.enablePipelining = false  // HTTP is pipelined by NIOAsyncChannel
            configuration.enableErrorHandling = false  // answered by Hummingbird, and before a first head by the observer
            configuration.enableResponseHeaderValidation = false  // Swift HTTP Types validate them already
            configuration.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
            let result = try pipeline.configureUpgradableHTTPServerPipeline(configuration: configuration)
            try pipeline.addHandler(headGuard, position: .first)
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(observer, position: .after(decoder))
            return Value(upgradeResult: result, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeResult.get() {
            case .webSocket:
                // The session runs in the connection's handlers; nothing waits for it here.
                return
            case .notUpgraded(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .failedUpgrade(let http):
                logger.debug("WebSocket upgrade refused")
                try await http.executeThenClose { _, outbound in
                    let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
                    try await outbound.write(contentsOf: [.head(head), .end(nil)])
                }
            }
        } catch {
            logger.trace("Connection ended before its first request", metadata: ["error.type": "\(type(of: error))"])
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with a WebSocket upgrade on ``CourierChannel/path``, guarded as ``CourierChannel`` describes.
    package static func courier(
        http1: HTTP1Channel.Configuration,
        maxFrameSize: Int,
        headTimeout: Duration,
        maxHeadBytes: Int,
        pingInterval: Duration,
        environment: GatewayEnvironment,
        runner: RequestRunner,
        trustedProxies: TrustedProxies,
        logger: Logger
    ) -> HTTPServerBuilder {
        // Each upgraded connection's session, told its client's address (the proxy's header when the peer is one).
        let session: @Sendable (any Channel, HTTPRequestHead) -> SessionHandler = { channel, head in
            let client = trustedProxies.client(
                peer: channel.remoteAddress?.ipAddress,
                headers: head.headers.map { (name: $0.name, value: $0.value) }
            )
            return SessionHandler(environment: environment, runner: runner, peer: client, logger: logger)
        }
        return HTTPServerBuilder { responder in
            CourierChannel(
                responder: responder,
                http1: http1,
                maxFrameSize: maxFrameSize,
                headTimeout: TimeAmount(headTimeout),
                maxHeadBytes: maxHeadBytes,
                pingInterval: TimeAmount(pingInterval),
                session: session
            )
        }
    }
}
