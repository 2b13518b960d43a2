// Courier — Apache-2.0
internal import NIOCore
internal import NIOPosix
internal import Synchronization

/// A TCP proxy on 127.0.0.1 between clients and a server that misbehaves as networks do: it delays every chunk (in
/// order), and on command cuts every connection, or swallows what passes for a while and then cuts (a path that
/// died without telling anyone). `heal()` makes it a plain proxy again.
public final class ChaosProxy: Sendable {
    public enum Fault: Sendable, CaseIterable {
        /// Both sides see the connection close at once.
        case cut
        /// Bytes vanish in both directions for `blackhole`, then the connection is cut.
        case blackhole
    }

    private struct State {
        var pairs: [ObjectIdentifier: (any Channel, any Channel)] = [:]
        var swallowing = false
        var maxDelayMilliseconds: Int64 = 0
        var faults = 0
    }

    /// The state the proxy and its relays share.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    private let shared = Shared()
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel
    /// The port clients connect to.
    public let port: Int

    /// Listens on a free port and forwards to `127.0.0.1:upstreamPort`.
    public init(upstreamPort: Int) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        let shared = self.shared
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: true)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: inbound.eventLoop)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMap { outbound in
                        let pair = (inbound as any Channel, outbound)
                        shared.state.withLock { $0.pairs[ObjectIdentifier(inbound)] = pair }
                        inbound.closeFuture.whenComplete { _ in
                            outbound.close(promise: nil)
                            _ = shared.state.withLock { $0.pairs.removeValue(forKey: ObjectIdentifier(inbound)) }
                        }
                        outbound.closeFuture.whenComplete { _ in inbound.close(promise: nil) }
                        return inbound.pipeline.addHandler(Relay(to: outbound, shared: shared)).flatMap {
                            outbound.pipeline.addHandler(Relay(to: inbound, shared: shared))
                        }
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        self.listener = listener
        port = listener.localAddress?.port ?? 0
    }

    /// Delays each chunk by up to `milliseconds` (order kept).
    public func delay(upTo milliseconds: Int64) { shared.state.withLock { $0.maxDelayMilliseconds = milliseconds } }

    /// Injects `fault` into every open connection.
    public func inject(_ fault: Fault, blackhole: Duration = .milliseconds(500)) async {
        shared.state.withLock { $0.faults += 1 }
        if fault == .blackhole {
            shared.state.withLock { $0.swallowing = true }
            try? await Task.sleep(for: blackhole)
            shared.state.withLock { $0.swallowing = false }
        }
        let pairs = shared.state.withLock { $0.pairs.values.map { $0 } }
        for (inbound, outbound) in pairs {
            inbound.close(promise: nil)
            outbound.close(promise: nil)
        }
    }

    /// Connections open through the proxy now.
    public var openConnections: Int { shared.state.withLock { $0.pairs.count } }

    /// Faults injected so far.
    public var faults: Int { shared.state.withLock { $0.faults } }

    /// A plain proxy from now on: no delay, no swallowing.
    public func heal() {
        shared.state.withLock {
            $0.maxDelayMilliseconds = 0
            $0.swallowing = false
        }
    }

    /// Closes every connection and the listener.
    public func shutdown() async {
        try? await listener.close()
        try? await group.shutdownGracefully()
    }

    /// Copies what one side reads to the other side, after the current delay, in order.
    private final class Relay: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let peer: any Channel
        private let shared: Shared
        private var lastDeadline = NIODeadline.now()

        init(to peer: any Channel, shared: Shared) {
            self.peer = peer
            self.shared = shared
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            let (swallowing, maxDelay) = shared.state.withLock { ($0.swallowing, $0.maxDelayMilliseconds) }
            guard !swallowing else { return }
            let delay = maxDelay > 0 ? Int64.random(in: 0...maxDelay) : 0
            lastDeadline = max(lastDeadline, .now() + .milliseconds(delay))
            let peer = self.peer
            if lastDeadline <= .now() {
                peer.writeAndFlush(buffer, promise: nil)
            } else {
                context.eventLoop.scheduleTask(deadline: lastDeadline) { peer.writeAndFlush(buffer, promise: nil) }
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
