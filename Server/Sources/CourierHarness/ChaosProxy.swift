// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import NIOCore
internal import NIOPosix
internal import Synchronization

/// A TCP proxy on 127.0.0.1 between clients and a server that misbehaves as networks do: it delays every chunk (in
/// order), and on command cuts every connection, or swallows what passes for a while and then cuts (a path that
/// died without telling anyone). `heal()` makes it a plain proxy again.
///
/// It relays WebSocket frames whole, so it can also record the text frames each side sends (``clientTexts``,
/// ``serverTexts``) and hold back a server frame until the client has sent a given request
/// (``holdBack(frameContaining:untilClientSends:)``): an event that comes late, as one of two racing publications may.
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
        /// The next server text frame containing this is held back …
        var holdMarker: String?
        /// … until the client sends a text frame containing one of these.
        var releaseMarkers: [String] = []
        var heldFrame: [UInt8]?
        var held = 0
        var clientTexts: [String] = []
        var serverTexts: [String] = []
        /// Both directions' text frames in the order the proxy relayed them (`true`: from the server).
        var transcript: [(fromServer: Bool, text: String)] = []
        /// Waiting until clients have sent `count` text frames containing the marker.
        var clientWaiters: [(marker: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    /// The state the proxy and its relays share.
    private final class Shared: Sendable {
        let state = Locked(State())
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
                        return inbound.pipeline.addHandler(Relay(to: outbound, fromServer: false, shared: shared)).flatMap {
                            outbound.pipeline.addHandler(Relay(to: inbound, fromServer: true, shared: shared))
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

    /// Holds back the next text frame from the server whose payload contains `marker` (frames after it pass), and
    /// sends it once the client has sent a text frame containing one of `releases`.
    public func holdBack(frameContaining marker: String, untilClientSends releases: [String]) {
        shared.state.withLock {
            $0.holdMarker = marker
            $0.releaseMarkers = releases
        }
    }

    /// Frames held back so far.
    public var heldBack: Int { shared.state.withLock { $0.held } }

    /// Every text frame clients sent through the proxy, unmasked, in order.
    public var clientTexts: [String] { shared.state.withLock { $0.clientTexts } }

    /// Every text frame the server sent through the proxy, in order (a held frame when it was held).
    public var serverTexts: [String] { shared.state.withLock { $0.serverTexts } }

    /// Both directions' text frames in the order the proxy relayed them (`fromServer` tells which way).
    public var transcript: [(fromServer: Bool, text: String)] { shared.state.withLock { $0.transcript } }

    /// Returns once clients have sent `count` text frames containing `marker` (those sent already included), without
    /// polling.
    public func clientTexts(containing marker: String, count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = shared.state.withLock { state -> Bool in
                guard state.clientTexts.count(where: { $0.contains(marker) }) < count else { return true }
                state.clientWaiters.append((marker, count, continuation))
                return false
            }
            if ready { continuation.resume() }
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

    /// Copies what one side reads to the other side, after the current delay, in order: the HTTP upgrade as it
    /// comes, then WebSocket frames whole.
    private final class Relay: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let peer: any Channel
        private let fromServer: Bool
        private let shared: Shared
        private var lastDeadline = NIODeadline.now()
        private var pending: [UInt8] = []
        private var upgraded = false

        init(to peer: any Channel, fromServer: Bool, shared: Shared) {
            self.peer = peer
            self.fromServer = fromServer
            self.shared = shared
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = Self.unwrapInboundIn(data)
            guard !shared.state.withLock({ $0.swallowing }) else { return }
            pending += buffer.readBytes(length: buffer.readableBytes) ?? []
            if !upgraded {
                // The upgrade request or response: up to the blank line.
                guard let end = Self.headerEnd(pending) else { return }
                forward(Array(pending[..<end]), context: context)
                pending.removeFirst(end)
                upgraded = true
            }
            while let frame = Self.nextFrame(pending) {
                pending.removeFirst(frame.length)
                let bytes = frame.bytes
                if fromServer {
                    let holding = frame.text.map { text in
                        shared.state.withLock { state in
                            state.serverTexts.append(text)
                            state.transcript.append((true, text))
                            guard let marker = state.holdMarker, text.contains(marker) else { return false }
                            state.holdMarker = nil
                            state.heldFrame = bytes
                            state.held += 1
                            return true
                        }
                    } ?? false
                    if holding { continue }
                    forward(bytes, context: context)
                } else {
                    let released = frame.text.flatMap { text in
                        shared.state.withLock { state -> [UInt8]? in
                            state.clientTexts.append(text)
                            state.transcript.append((false, text))
                            state.clientWaiters.removeAll { waiter in
                                guard text.contains(waiter.marker),
                                    state.clientTexts.count(where: { $0.contains(waiter.marker) }) >= waiter.count
                                else { return false }
                                waiter.continuation.resume()
                                return true
                            }
                            guard state.releaseMarkers.contains(where: text.contains) else { return nil }
                            defer { state.heldFrame = nil }
                            return state.heldFrame
                        }
                    }
                    forward(bytes, context: context)
                    // The held frame goes to the client, after its request has gone to the server.
                    if let released { context.channel.writeAndFlush(context.channel.allocator.buffer(bytes: released), promise: nil) }
                }
            }
        }

        private func forward(_ bytes: [UInt8], context: ChannelHandlerContext) {
            let maxDelay = shared.state.withLock { $0.maxDelayMilliseconds }
            let delay = maxDelay > 0 ? Int64.random(in: 0...maxDelay) : 0
            lastDeadline = max(lastDeadline, .now() + .milliseconds(delay))
            let peer = self.peer
            let buffer = peer.allocator.buffer(bytes: bytes)
            if lastDeadline <= .now() {
                peer.writeAndFlush(buffer, promise: nil)
            } else {
                context.eventLoop.scheduleTask(deadline: lastDeadline) { peer.writeAndFlush(buffer, promise: nil) }
            }
        }

        /// Where the HTTP head ends (after its blank line), if it has all come.
        static func headerEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            for index in 3..<bytes.count where bytes[index - 3...index] == [13, 10, 13, 10] { return index + 1 }
            return nil
        }

        /// The first whole WebSocket frame of `bytes` (RFC 6455 §5.2): its bytes, its length, and its payload as text
        /// when it is a final text frame.
        static func nextFrame(_ bytes: [UInt8]) -> (bytes: [UInt8], length: Int, text: String?)? {
            guard bytes.count >= 2 else { return nil }
            let masked = bytes[1] & 0x80 != 0
            var length = Int(bytes[1] & 0x7f)
            var header = 2
            if length == 126 {
                guard bytes.count >= 4 else { return nil }
                length = Int(bytes[2]) << 8 | Int(bytes[3])
                header = 4
            } else if length == 127 {
                guard bytes.count >= 10 else { return nil }
                length = bytes[2..<10].reduce(0) { $0 << 8 | Int($1) }
                header = 10
            }
            let maskStart = header
            if masked { header += 4 }
            guard bytes.count >= header + length else { return nil }
            var payload = Array(bytes[header..<(header + length)])
            if masked {
                let mask = Array(bytes[maskStart..<(maskStart + 4)])
                for index in payload.indices { payload[index] ^= mask[index % 4] }
            }
            let isFinalText = bytes[0] == 0x81
            return (
                Array(bytes[..<(header + length)]), header + length,
                isFinalText ? String(decoding: payload, as: UTF8.self) : nil
            )
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
