// Courier — Apache-2.0
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Testing

@testable import CourierSDK
import CourierWire

/// The transport against peers that misbehave during the handshake, on real sockets on 127.0.0.1: none of them may
/// keep a client in "connecting" for ever (a device stuck there never retries another node, and never gets its
/// messages).
@Suite("WebSocket transport handshake", .timeLimit(.minutes(1)))
struct WebSocketTransportTests {
    @Test("a server that accepts the connection and never answers the upgrade is given up on after the timeout")
    func silentServer() async throws {
        let peer = try await MisbehavingPeer(.silent)
        let transport = WebSocketTransport(handshakeTimeout: .milliseconds(300))
        let started = ContinuousClock.now
        await #expect(throws: WebSocketTransportError.handshakeTimedOut) {
            try await transport.run(url: peer.url, receive: { _ in }, session: { _ in Issue.record("no session") })
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        // The client closed its socket: the peer sees the connection end.
        try await peer.waitForClosedConnections(1)
        await peer.shutdown()
    }

    @Test("a server that closes its side during the handshake fails the attempt at once, not after the timeout")
    func halfClosedDuringHandshake() async throws {
        for behaviour in [MisbehavingPeer.Behaviour.halfCloseAfterRequest, .closeAfterRequest] {
            let peer = try await MisbehavingPeer(behaviour)
            let transport = WebSocketTransport(handshakeTimeout: .seconds(50))
            let started = ContinuousClock.now
            await #expect(throws: (any Error).self) {
                try await transport.run(url: peer.url, receive: { _ in }, session: { _ in Issue.record("no session") })
            }
            #expect(ContinuousClock.now - started < .seconds(10), "\(behaviour)")
            try await peer.waitForClosedConnections(1)
            await peer.shutdown()
        }
    }

    @Test("cancelling a connection attempt that waits on a silent server ends it at once and closes the socket")
    func cancelledDuringHandshake() async throws {
        let peer = try await MisbehavingPeer(.silent)
        let transport = WebSocketTransport(handshakeTimeout: .seconds(50))
        let attempt = Task {
            try await transport.run(url: peer.url, receive: { _ in }, session: { _ in Issue.record("no session") })
        }
        try await peer.waitForOpenConnections(1)
        let started = ContinuousClock.now
        attempt.cancel()
        await #expect(throws: (any Error).self) { try await attempt.value }
        #expect(ContinuousClock.now - started < .seconds(10))
        try await peer.waitForClosedConnections(1)
        await peer.shutdown()
    }

    @Test("an upgrade answered with an HTTP error is refused, not retried on the same socket")
    func refusedUpgrade() async throws {
        let peer = try await MisbehavingPeer(.forbidden)
        await #expect(throws: WebSocketTransportError.upgradeRefused) {
            try await WebSocketTransport().run(url: peer.url, receive: { _ in }, session: { _ in Issue.record("no session") })
        }
        await peer.shutdown()
    }

    @Test("URLs that are not ws:// or wss:// with a host are refused before any connection")
    func invalidURLs() async throws {
        for text in ["http:/nohost", "ftp://127.0.0.1/v1/ws", "file:///tmp/x"] {
            let url = try #require(URL(string: text))
            await #expect(throws: WebSocketTransportError.invalidURL) {
                try await WebSocketTransport().run(url: url, receive: { _ in }, session: { _ in })
            }
        }
    }
}

/// The transport against a WebSocket server that behaves: what goes over the wire, and how a connection ends.
@Suite("WebSocket transport frames", .timeLimit(.minutes(1)))
struct WebSocketTransportFrameTests {
    @Test("text goes both ways; the client's frames are masked; the server's ping is answered with its payload")
    func framesBothWays() async throws {
        let server = try await EchoWebSocketServer()
        let (texts, received) = AsyncStream.makeStream(of: String.self)
        try await WebSocketTransport().run(
            url: server.url,
            receive: { received.yield($0) },
            session: { sender in
                var iterator = texts.makeAsyncIterator()
                // The server pinged on connect and reports the pong it got back.
                #expect(await iterator.next() == "pong:ping-1")
                try await sender.send("hello ✓✓")
                #expect(await iterator.next() == "hello ✓✓")
            }
        )
        // The pong, the text and the close frame (which the server may read after `run` returned).
        let record = await server.waitUntil { $0.closeCodes.count == 1 }
        #expect(record.clientFrames == 3 && record.unmaskedClientFrames == 0, "\(record)")
        #expect(record.closeCodes == [1000])
        await server.shutdown()
    }

    @Test("a session that returns ends the connection with close 1000, and the close's echo is not an error")
    func cleanEnd() async throws {
        let server = try await EchoWebSocketServer(pings: false)
        // The server echoes the close at once; the echo may be read before the session's task has finished.
        for _ in 0..<100 {
            try await WebSocketTransport().run(url: server.url, receive: { _ in }, session: { _ in })
        }
        let record = await server.waitUntil { $0.closeCodes.count == 100 }
        #expect(record.closeCodes == Array(repeating: 1000, count: 100))
        await server.shutdown()
    }
}

/// A WebSocket server on 127.0.0.1 (SwiftNIO's upgrader) that echoes text, pings each new connection and reports
/// the pong as text, echoes a close, and records what the client's frames looked like.
final class EchoWebSocketServer: Sendable {
    struct Record: Sendable {
        var clientFrames = 0
        var unmaskedClientFrames = 0
        var closeCodes: [Int] = []
    }

    let record = NIOLockedValueBox(Record())
    private let listener: any Channel
    /// Signals each change of the record (one waiter at a time).
    private let changes: AsyncStream<Void>
    let url: URL

    init(pings: Bool = true) async throws {
        let record = self.record
        let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.changes = changes
        listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: 1 << 20,
                    shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                Echo(record: record, pings: pings, changed: changed)
                            )
                        }
                    }
                )
                return channel.pipeline.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                )
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        url = URL(string: "ws://127.0.0.1:\(listener.localAddress?.port ?? 0)/v1/ws")!
    }

    func shutdown() async { try? await listener.close() }

    /// The record once `condition` holds.
    func waitUntil(_ condition: (Record) -> Bool) async -> Record {
        let now = record.withLockedValue { $0 }
        if condition(now) { return now }
        for await _ in changes {
            let now = record.withLockedValue { $0 }
            if condition(now) { return now }
        }
        return record.withLockedValue { $0 }
    }

    private final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame
        let record: NIOLockedValueBox<Record>
        let pings: Bool
        let changed: AsyncStream<Void>.Continuation

        init(record: NIOLockedValueBox<Record>, pings: Bool, changed: AsyncStream<Void>.Continuation) {
            self.record = record
            self.pings = pings
            self.changed = changed
        }

        func handlerAdded(context: ChannelHandlerContext) {
            guard pings else { return }
            let ping = WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "ping-1"))
            context.writeAndFlush(Self.wrapOutboundOut(ping), promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = Self.unwrapInboundIn(data)
            record.withLockedValue { record in
                record.clientFrames += 1
                if frame.maskKey == nil { record.unmaskedClientFrames += 1 }
            }
            defer { changed.yield() }
            var payload = frame.unmaskedData
            switch frame.opcode {
            case .text:
                context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: payload)), promise: nil)
            case .pong:
                let text = ByteBuffer(string: "pong:" + String(buffer: payload))
                context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: text)), promise: nil)
            case .connectionClose:
                let code = payload.readInteger(as: UInt16.self).map(Int.init) ?? -1
                record.withLockedValue { $0.closeCodes.append(code) }
                changed.yield()
                var echo = ByteBuffer()
                echo.writeInteger(UInt16(truncatingIfNeeded: code))
                context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)))
                    .whenComplete { _ in context.close(promise: nil) }
            default:
                break
            }
        }
    }
}

/// A TCP server on 127.0.0.1 that accepts connections and then misbehaves in one way.
final class MisbehavingPeer: Sendable {
    enum Behaviour: Sendable {
        /// Reads everything, answers nothing.
        case silent
        /// Once the request head arrived, shuts down its sending side (FIN) and keeps the socket open.
        case halfCloseAfterRequest
        /// Once the request head arrived, closes the connection.
        case closeAfterRequest
        /// Answers the upgrade request with 403.
        case forbidden
    }

    private let listener: any Channel
    private let counts = NIOLockedValueBox((open: 0, closed: 0))
    /// Signals each change of the counts (one waiter at a time).
    private let changes: AsyncStream<Void>
    let url: URL

    init(_ behaviour: Behaviour) async throws {
        let counts = self.counts
        let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.changes = changes
        listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                counts.withLockedValue { $0.open += 1 }
                changed.yield()
                channel.closeFuture.whenComplete { _ in
                    counts.withLockedValue { $0.closed += 1 }
                    changed.yield()
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(behaviour))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        url = URL(string: "ws://127.0.0.1:\(listener.localAddress?.port ?? 0)/v1/ws")!
    }

    func waitForOpenConnections(_ count: Int) async throws {
        await waitUntil { $0.open >= count }
    }

    func waitForClosedConnections(_ count: Int) async throws {
        await waitUntil { $0.closed >= count }
    }

    private func waitUntil(_ condition: ((open: Int, closed: Int)) -> Bool) async {
        if condition(counts.withLockedValue { $0 }) { return }
        for await _ in changes where condition(counts.withLockedValue { $0 }) { return }
    }

    func shutdown() async { try? await listener.close() }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let behaviour: Behaviour
        private let received = NIOLockedValueBox("")

        init(_ behaviour: Behaviour) { self.behaviour = behaviour }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: Self.unwrapInboundIn(data))
            let head = received.withLockedValue { received -> Bool in
                received += text
                return received.contains("\r\n\r\n")
            }
            guard head else { return }
            switch behaviour {
            case .silent:
                break
            case .halfCloseAfterRequest:
                context.close(mode: .output, promise: nil)
            case .closeAfterRequest:
                context.close(promise: nil)
            case .forbidden:
                let answer = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
                context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
            }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // The client's FIN: close our side too, as a server does.
            if event is ChannelEvent, case .inputClosed = event as? ChannelEvent { context.close(promise: nil) }
        }
    }
}
