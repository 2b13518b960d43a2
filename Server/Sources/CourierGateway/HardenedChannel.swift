// Courier — Apache-2.0
internal import Hummingbird
internal import HummingbirdCore
internal import Logging
internal import NIOCore
internal import NIOHTTP1
internal import NIOWebSocket

/// First in the pipeline: a deadline and a byte cap for the connection's first request head; a pass-through after.
final class RequestHeadGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let maxBytes: Int
    private let timeout: TimeAmount
    private var received = 0
    private var armed = true
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(maxBytes: Int, timeout: TimeAmount) {
        self.maxBytes = maxBytes
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard armed else { return context.fireChannelRead(data) }
        received += Self.unwrapInboundIn(data).readableBytes
        // The decoder runs synchronously and disarms this guard when the head is complete.
        context.fireChannelRead(data)
        if armed, received > maxBytes { reject("431 Request Header Fields Too Large") }
    }

    /// The head is complete: the guard has done its job.
    func disarm() {
        armed = false
        timer?.cancel()
        timer = nil
    }

    /// A request's head arrived: its body must be complete within the deadline, or the connection closes.
    func armBody() {
        disarm()
        guard let context else { return }
        let channel = context.channel
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    /// Answers `status` without a body and closes the connection.
    func reject(_ status: String) {
        guard armed, let context else { return }
        disarm()
        let text = "HTTP/1.1 \(status)\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        let buffer = context.channel.allocator.buffer(string: text)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func start(_ context: ChannelHandlerContext) {
        guard armed, timer == nil else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            reject("408 Request Timeout")
        }
    }
}

/// Right after the HTTP decoder: disarms the head guard once a head is decoded, holds each request's body to the
/// deadline, and answers a parse error before the first head. Removed when the connection upgrades.
final class RequestHeadObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart

    private let headGuard: RequestHeadGuard
    private var sawHead = false

    init(headGuard: RequestHeadGuard) { self.headGuard = headGuard }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head:
            sawHead = true
            headGuard.armBody()
        case .end:
            headGuard.disarm()
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !sawHead, error is HTTPParserError {
            sawHead = true
            headGuard.reject("400 Bad Request")
        }
        context.fireErrorCaught(error)
    }
}

/// RFC 6455 §5.1: a server closes the connection on an unmasked client frame (close code 1002).
/// No frame after the server's close frame (RFC 6455 §5.5.1). The device's queue writes straight into the channel
/// (ADR 0022), so an answer finished after the closing handshake began (the device closed while requests were under
/// way, or the server ended the session) is refused here instead of following the close frame; its write fails like
/// any write to a closed connection.
final class CloseFrameGuard: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// The close frame went out: nothing follows it.
    private(set) var closeSent = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !closeSent else {
            promise?.fail(ChannelError.outputClosed)
            return
        }
        if unwrapOutboundIn(data).opcode == .connectionClose { closeSent = true }
        context.write(data, promise: promise)
    }
}

final class RequireMaskedFrames: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var failed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        guard Self.unwrapInboundIn(data).maskKey != nil else {
            failed = true
            context.closeWebSocket(.protocolError, reason: "frame.unmasked")
            return
        }
        context.fireChannelRead(data)
    }
}

/// The server's WebSocket pings: every `interval` a ping with 8 random bytes; a peer that has not answered the last one
/// with a matching pong by the next is sent a close frame (1001, `Ping timeout`) and closed. What Hummingbird's
/// auto-ping does, on an event-loop timer instead of a task per connection (a suspended task keeps about 3 KiB).
final class KeepAlive: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let interval: TimeAmount
    private var timer: Scheduled<Void>?
    private var unanswered: ByteBuffer?

    init(interval: TimeAmount) { self.interval = interval }

    func handlerAdded(context: ChannelHandlerContext) { schedule(context) }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        if frame.opcode == .pong, let unanswered, frame.unmaskedData == unanswered { self.unanswered = nil }
        context.fireChannelRead(data)
    }

    private func stop() {
        timer?.cancel()
        timer = nil
    }

    private func schedule(_ context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: interval) { [self] in
            tick(context)
        }
    }

    private func tick(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        if unanswered != nil {
            context.closeWebSocket(.goingAway, reason: "Ping timeout")
            // A peer that reads nothing may never take the close frame: closed a little later regardless.
            let channel = context.channel
            context.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
            return
        }
        var payload = context.channel.allocator.buffer(capacity: 8)
        payload.writeInteger(UInt64.random(in: .min ... .max))
        unanswered = payload
        context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: payload)), promise: nil)
        schedule(context)
    }
}

extension ChannelHandlerContext {
    /// Sends a WebSocket close frame with `code` and `reason` (at most 123 bytes) from this handler's place in the
    /// pipeline, then closes the connection once it is written.
    func closeWebSocket(_ code: WebSocketErrorCode, reason: String = "") {
        var payload = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        payload.write(webSocketErrorCode: code)
        payload.writeString(reason)
        let channel = self.channel
        writeAndFlush(NIOAny(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
