// Courier — Apache-2.0
public import Foundation
internal import NIOConcurrencyHelpers
internal import NIOCore
internal import NIOHTTP1
internal import NIOPosix
internal import NIOWebSocket

#if canImport(Network)
internal import Network
internal import NIOTransportServices
#else
internal import NIOSSL
internal import CourierWire
#endif

/// The default transport: one WebSocket per device, on SwiftNIO. On Apple platforms the connection is a
/// Network.framework connection (NIO Transport Services): TLS from the system, its trust store, proxies and VPN, and
/// path handover; elsewhere a POSIX socket with TLS through NIOSSL for `wss`.
///
/// Every phase that waits on the network is bounded or cancellable: the TCP connect and the HTTP upgrade must finish
/// within ``handshakeTimeout`` (a server or a network path that accepts the connection and then says nothing is
/// given up on, and the client retries), a peer that closes its side closes the connection (no half-open socket
/// waits for ever), and cancelling the task that runs the transport closes the connection at once, in every phase.
public struct WebSocketTransport: Transport {
    /// The largest message accepted from the server, fragments together (sync pages can be large).
    public var maxFrameBytes: Int
    /// The most the TCP connect, and then the WebSocket upgrade, may take.
    public var handshakeTimeout: Duration

    public init(maxFrameBytes: Int = 64 << 20, handshakeTimeout: Duration = .seconds(10)) {
        self.maxFrameBytes = maxFrameBytes
        self.handshakeTimeout = handshakeTimeout
    }

    public func run(
        url: URL,
        receive: @escaping @Sendable (String) async -> Void,
        session: @escaping @Sendable (any TransportSender) async throws -> Void
    ) async throws {
        let endpoint = try Endpoint(url)
        let channel = try await connect(to: endpoint)
        try await channel.executeThenClose { inbound, outbound in
            let writer = FrameWriter(outbound: outbound)
            // Set once `session` returned: the connection closing after that (our close frame's echo, say) is the
            // end we asked for, not a failure.
            let sessionEnded = NIOLockedValueBox(false)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await frame in inbound {
                        switch frame.opcode {
                        case .text:
                            await receive(String(buffer: frame.unmaskedData))
                        case .ping:
                            try await writer.write(.pong, frame.unmaskedData)
                        case .connectionClose:
                            // Echo the code (RFC 6455 §5.5.1), then the connection is closed below.
                            var data = frame.unmaskedData
                            let code = data.readSlice(length: 2) ?? ByteBuffer()
                            try? await writer.write(.connectionClose, code)
                            if sessionEnded.withLockedValue({ $0 }) { return }
                            throw TransportClosed()
                        default:
                            continue  // binary frames are not part of the protocol; pongs need no answer
                        }
                    }
                    if sessionEnded.withLockedValue({ $0 }) { return }
                    throw TransportClosed()
                }
                group.addTask {
                    try await session(Sender(writer: writer))
                    sessionEnded.withLockedValue { $0 = true }
                    var normal = ByteBuffer()
                    normal.write(webSocketErrorCode: .normalClosure)
                    try? await writer.write(.connectionClose, normal)
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
    }

    private typealias WebSocketChannel = NIOAsyncChannel<WebSocketFrame, WebSocketFrame>

    private enum Upgrade: Sendable {
        case upgraded(WebSocketChannel)
        case refused
    }

    /// Connects and upgrades, within the handshake timeout and closing the channel when the task is cancelled.
    private func connect(to endpoint: Endpoint) async throws -> WebSocketChannel {
        let opened = NIOLockedValueBox<(any Channel)?>(nil)
        let timedOut = NIOLockedValueBox(false)
        let timeout = TimeAmount(handshakeTimeout)
        let maxFrameBytes = self.maxFrameBytes
        let upgrade: EventLoopFuture<Upgrade> = try await withTaskCancellationHandler {
            try await Self.open(endpoint, timeout: timeout) { channel in
                opened.withLockedValue { $0 = channel }
                return channel.eventLoop.makeCompletedFuture {
                    let upgrade = try Self.configureUpgrade(on: channel, to: endpoint, maxFrameBytes: maxFrameBytes)
                    let deadline = channel.eventLoop.scheduleTask(in: timeout) {
                        timedOut.withLockedValue { $0 = true }
                        channel.close(promise: nil)
                    }
                    upgrade.whenComplete { _ in deadline.cancel() }
                    return upgrade
                }
            }
        } onCancel: {
            opened.withLockedValue { $0 }?.close(promise: nil)
        }
        let result: Upgrade
        do {
            result = try await withTaskCancellationHandler {
                try await upgrade.get()
            } onCancel: {
                opened.withLockedValue { $0 }?.close(promise: nil)
            }
        } catch {
            if timedOut.withLockedValue({ $0 }) { throw WebSocketTransportError.handshakeTimedOut }
            try Task.checkCancellation()
            throw error
        }
        switch result {
        case .upgraded(let channel):
            if Task.isCancelled {
                try? await channel.channel.close()
                throw CancellationError()
            }
            return channel
        case .refused:
            throw WebSocketTransportError.upgradeRefused
        }
    }

    #if canImport(Network)
    /// Apple platforms: a Network.framework connection, with the system's TLS for `wss`. (The only code here that
    /// CI on Linux does not build: keep it this small.)
    private static func open<Output: Sendable>(
        _ endpoint: Endpoint,
        timeout: TimeAmount,
        _ initialize: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> Output {
        // TCP_NODELAY is NIOTSConnectionBootstrap's default; the host name goes to TLS for SNI and verification.
        var bootstrap = NIOTSConnectionBootstrap(group: NIOTSEventLoopGroup.singleton).connectTimeout(timeout)
        if endpoint.usesTLS { bootstrap = bootstrap.tlsOptions(NWProtocolTLS.Options()) }
        return try await bootstrap.connect(host: endpoint.host, port: endpoint.port, channelInitializer: initialize)
    }
    #else
    /// A POSIX socket, with NIOSSL for `wss` (the host name is sent for SNI and checked against the certificate).
    private static func open<Output: Sendable>(
        _ endpoint: Endpoint,
        timeout: TimeAmount,
        _ initialize: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> Output {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: endpoint.host, port: endpoint.port) { channel in
                if endpoint.usesTLS {
                    do {
                        let handler = try NIOSSLClientHandler(
                            context: try tlsContext(),
                            serverHostname: endpoint.isIPAddress ? nil : endpoint.host
                        )
                        try channel.pipeline.syncOperations.addHandler(handler)
                    } catch {
                        return channel.eventLoop.makeFailedFuture(error)
                    }
                }
                return initialize(channel)
            }
    }

    /// One TLS context for every connection (building one loads the system's trust roots).
    private static let sharedTLSContext = NIOLockedValueBox<NIOSSLContext?>(nil)
    private static func tlsContext() throws -> NIOSSLContext {
        try sharedTLSContext.withLockedValue { context in
            if let context { return context }
            let made = try NIOSSLContext(configuration: .makeClientConfiguration())
            context = made
            return made
        }
    }
    #endif

    private static func configureUpgrade(
        on channel: any Channel,
        to endpoint: Endpoint,
        maxFrameBytes: Int
    ) throws -> EventLoopFuture<Upgrade> {
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
            maxFrameSize: min(maxFrameBytes, Int(UInt32.max)),
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0,
                            maxAccumulatedFrameCount: Int.max,
                            maxAccumulatedFrameSize: maxFrameBytes
                        )
                    )
                    return Upgrade.upgraded(try WebSocketChannel(wrappingChannelSynchronously: channel))
                }
            }
        )
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: endpoint.hostHeader)
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: endpoint.path, headers: headers)
        var configuration = NIOUpgradableHTTPClientPipelineConfiguration(
            upgradeConfiguration: NIOTypedHTTPClientUpgradeConfiguration(
                upgradeRequestHead: head,
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.close(promise: nil)
                    return channel.eventLoop.makeSucceededFuture(.refused)
                }
            )
        )
        configuration.leftOverBytesStrategy = .forwardBytes
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: configuration)
    }

    /// Writes frames masked, as RFC 6455 §5.3 requires of a client.
    private struct FrameWriter: Sendable {
        let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>

        func write(_ opcode: WebSocketOpcode, _ data: ByteBuffer) async throws {
            try await outbound.write(WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: data))
        }
    }

    private struct Sender: TransportSender {
        let writer: FrameWriter
        func send(_ text: String) async throws { try await writer.write(.text, ByteBuffer(string: text)) }
    }

    /// Where a `ws://` or `wss://` URL points.
    private struct Endpoint: Sendable {
        let host: String
        let port: Int
        let usesTLS: Bool
        let path: String

        init(_ url: URL) throws {
            guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
                throw WebSocketTransportError.invalidURL
            }
            switch scheme {
            case "ws", "http": usesTLS = false
            case "wss", "https": usesTLS = true
            default: throw WebSocketTransportError.invalidURL
            }
            // An IPv6 literal comes back from `URL.host` with or without brackets depending on the platform.
            self.host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            port = url.port ?? (usesTLS ? 443 : 80)
            let query = url.query.map { "?\($0)" } ?? ""
            path = (url.path.isEmpty ? "/" : url.path) + query
        }

        /// TLS sends no server name for an address literal.
        var isIPAddress: Bool { (try? SocketAddress(ipAddress: host, port: port)) != nil }

        var hostHeader: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return port == (usesTLS ? 443 : 80) ? name : "\(name):\(port)"
        }
    }
}

/// Why ``WebSocketTransport`` could not open a connection.
public enum WebSocketTransportError: Error, Sendable, Equatable {
    /// The URL is not a `ws://` or `wss://` URL with a host.
    case invalidURL
    /// The TCP connect or the WebSocket upgrade did not finish within the handshake timeout.
    case handshakeTimedOut
    /// The server answered the upgrade request without switching protocols.
    case upgradeRefused
}
