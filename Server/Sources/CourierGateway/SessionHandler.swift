// Courier — Apache-2.0
internal import CoreMetrics
internal import CourierDomain
internal import CourierStorage
internal import CourierWire
internal import Logging
internal import NIOCore
internal import NIOWebSocket
internal import CourierServerCore

/// One device's WebSocket session, as the last handler of its connection's pipeline (ADR 0034). It turns frames into
/// the events of its ``SessionStateMachine`` and carries out the actions that come back, on the connection's event
/// loop:
/// - a message is put together from its fragments (at most `hardFrameBytes`, or the connection closes with 1009; text
///   that is not UTF-8 closes it with 1007), decoded once, and handed to the state machine;
/// - a request that waits for the store runs in the ``RequestRunner``; one that does not (`ping`, a refusal) is
///   answered here, with no task;
/// - answers go to the device's queue in request order, then their events to the bus; the queue writes them from the
///   event loop, with one flush for what is queued by then (ADR 0022);
/// - the connection is not read while the state machine holds back (a `connect` runs, or `maxRequestsInFlight`
///   requests are unanswered);
/// - the peer's ping is answered with a pong; its close frame with the close handshake; a node's graceful shutdown
///   ends the session (`server.shuttingDown`).
///
/// ``SessionControl`` says when the session must end (its authentication time or its token ran out, its queue
/// overflowed, the app's backend ended it, the node is stopping).
package final class SessionHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// What a request's answer is: the encoded reply and the events to publish after it.
    typealias Answer = (reply: String, publications: [Publication])

    let environment: GatewayEnvironment
    let runner: RequestRunner
    /// The peer's address (failed connects are throttled by address); `nil` when unknown.
    let peer: String?
    private var machine: SessionStateMachine<Answer>
    private var logger: Logger
    private var context: ChannelHandlerContext?
    /// The connection's event loop (kept after the handler is removed: requests under way report back to it).
    private var eventLoop: (any EventLoop)?
    private var control: SessionControl?
    private var queue: DeviceQueue?
    private var device: DeviceContext?
    /// `device` is in the registry (and counted online) until the connection closes.
    private var isRegistered = false
    /// The fragments of the message being received.
    private var message: ByteBuffer?
    private var messageIsText = false
    /// The sends and reads under way, each opened once it has its place in the store's commit order.
    private var placeGates: [Int: PipelineGate] = [:]
    /// A read the pipeline asked for while the state machine held back.
    private var readPending = false
    /// Knows whether the close frame went out (from here, or from the queue once it drained).
    private var closeGuard: CloseFrameGuard?
    /// This device's sends and other writes (``TokenBucket``); `nil` when off.
    private var sends: TokenBucket?
    private var writes: TokenBucket?
    private var typing: TokenBucket?

    init(environment: GatewayEnvironment, runner: RequestRunner, peer: String?, logger: Logger) {
        self.environment = environment
        self.runner = runner
        self.peer = peer
        var logger = logger
        // Every line of the session names its client (the address a trusted proxy forwarded, or the TCP peer).
        logger[metadataKey: "courier.client"] = "\(peer ?? "unknown")"
        self.logger = logger
        machine = SessionStateMachine(
            window: environment.limits.maxRequestsInFlight,
            maxFailedConnects: environment.limits.failedConnectsPerConnection
        )
        let (limits, now) = (environment.limits, ContinuousClock.now)
        if limits.deviceSendsPerSecond > 0 { sends = TokenBucket(perSecond: limits.deviceSendsPerSecond, now: now) }
        if limits.deviceWritesPerSecond > 0 { writes = TokenBucket(perSecond: limits.deviceWritesPerSecond, now: now) }
        if limits.deviceTypingPerSecond > 0 { typing = TokenBucket(perSecond: limits.deviceTypingPerSecond, now: now) }
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        eventLoop = context.eventLoop
        closeGuard = try? context.pipeline.syncOperations.handler(type: CloseFrameGuard.self)
        let channel = context.channel
        let limits = environment.limits
        let metrics = environment.metrics
        let control = SessionControl(eventLoop: context.eventLoop, authTimeout: limits.authTimeout)
        let queue = DeviceQueue(
            capacity: limits.outboundQueueFrames,
            maxBytes: limits.outboundQueueBytes,
            sink: ChannelFrameSink(channel: channel, framesOut: metrics.framesOut),
            coder: environment.coder
        ) {
            metrics.slowConsumerDisconnects.increment()
            control.end(.slowConsumer)
        }
        self.control = control
        self.queue = queue
        let session = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (coder, logger) = (environment.coder, logger)
        control.onEnd { reason in
            Self.end(for: reason, queue: queue, control: control, channel: channel, coder: coder, logger: logger)
            channel.eventLoop.execute { session.value.ended(dropping: reason != .closed) }
        }
        metrics.connections.increment()
        runner.sessionOpened()
        // Closed while it upgraded: no `channelInactive` is coming.
        if !channel.isActive { return channelInactive(context: context) }
        // Upgraded after the node began to drain (its quiesce event went to the HTTP pipeline): ended at once.
        if runner.isStopping { control.end(.shuttingDown) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        control?.stop()
        // What was queued before the session ended still goes out; nothing queued after it does.
        queue?.finish()
        // What the device sent before it went still runs (unless the server ended the session first).
        ended(dropping: false)
        if let device, isRegistered {
            environment.registry.remove(device.connection, for: device.account)
            environment.metrics.devicesOnline.decrement()
            // `device` stays: requests the device sent before it went still run as it.
            isRegistered = false
        }
        environment.metrics.connections.decrement()
        runner.sessionClosed()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.opcode {
        case _ where frame.rsv1 || frame.rsv2 || frame.rsv3:
            fail(.protocolError, "No extension was negotiated: reserved bits must be 0.")
        case .text, .binary:
            guard message == nil else { return fail(.protocolError, "A new message began before the last one ended.") }
            messageIsText = frame.opcode == .text
            collect(frame)
        case .continuation:
            guard message != nil else { return fail(.protocolError, "A continuation frame with no message begun.") }
            collect(frame)
        case .ping:
            guard closeGuard?.closeSent != true else { return }
            context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            peerClosed(frame)
        default:
            break  // pongs (``KeepAlive`` reads them), reserved opcodes (refused by the decoder)
        }
    }

    func read(context: ChannelHandlerContext) {
        if machine.wantsToRead {
            context.read()
        } else {
            readPending = true
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Graceful shutdown (SIGTERM) ends every session; devices reconnect elsewhere and sync.
        if event is ChannelShouldQuiesceEvent {
            control?.end(.shuttingDown)
            return
        }
        // The device shut its side of the connection without a close frame (the app was killed): the session ends
        // as if it had closed, and what it sent before still runs.
        if case ChannelEvent.inputClosed = event {
            control?.end(.closed)
            ended(dropping: false)
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Connection failed", metadata: ["error.type": "\(type(of: error))"])
        // NIOWebSocket's error handler answers a protocol error with its close code, then closes.
        if !(error is NIOWebSocketError) { context.close(promise: nil) }
    }

    // MARK: Messages

    private func collect(_ frame: WebSocketFrame) {
        var data = frame.unmaskedData
        if message == nil { message = data } else { message!.writeBuffer(&data) }
        guard message!.readableBytes <= environment.limits.hardFrameBytes else {
            return fail(.messageTooLarge, "The message exceeds \(environment.limits.hardFrameBytes) bytes.")
        }
        guard frame.fin, let complete = message else { return }
        message = nil
        guard messageIsText else {
            environment.metrics.frameIn(nil)
            return receive(.refused(nil, WireError(code: .frameInvalid, message: "Frames are JSON text; binary messages are not accepted."), type: nil))
        }
        guard let text = String(validating: complete.readableBytesView, as: UTF8.self) else {
            return fail(.dataInconsistentWithMessage, "The text is not UTF-8.")
        }
        receive(decode(text))
    }

    /// Decodes a text message once, into what the state machine takes.
    private func decode(_ text: String) -> SessionStateMachine<Answer>.Inbound {
        let metrics = environment.metrics
        let limit = environment.limits.maxFrameBytes
        guard text.utf8.count <= limit else {
            metrics.frameIn(nil)
            let error = WireError(code: .frameTooLarge, message: "The frame exceeds \(limit) bytes.")
            return .refused(Self.requestID(atHeadOf: text), error, type: nil)
        }
        switch environment.coder.decodeClientFrame(text) {
        case .failure(let rejection):
            metrics.frameIn(nil)
            return .refused(rejection.requestID, rejection.error, type: rejection.type)
        case .success(let frame):
            metrics.frameIn(frame.type)
            if case .connect(let id, let request) = frame { return .connect(id, request) }
            if let refusal = rateLimited(frame) { return .refused(frame.requestID, refusal, type: frame.type) }
            return .request(frame)
        }
    }

    /// The refusal of a write past this device's or its account's rate (``TokenBucket``), or `nil`. Before `connect`
    /// nothing is counted (the request is refused for that).
    private func rateLimited(_ frame: ClientFrame) -> WireError? {
        guard let device, let kind = RateClass(frame.type) else { return nil }
        let now = ContinuousClock.now
        let wait: Duration?
        let what: String
        switch kind {
        case .send:
            wait = sends?.take(at: now) ?? environment.accountSends.take(device.account, at: now)
            what = "sends"
        case .write:
            wait = writes?.take(at: now)
            what = "writes"
        case .typing:
            wait = typing?.take(at: now)
            what = "typing indicators"
        }
        guard let wait else { return nil }
        let milliseconds = wait.roundedUpMilliseconds
        return WireError(
            code: .rateLimited,
            message: "Too many \(what) from this device or account; nothing was written. Retry in \(milliseconds) ms.",
            retryAfterMs: milliseconds
        )
    }

    private func receive(_ inbound: SessionStateMachine<Answer>.Inbound) {
        // Once the server has decided to close, what the device still sends is not answered.
        guard control?.hasEnded == false else { return }
        perform(machine.received(inbound))
    }

    // MARK: Actions

    private func perform(_ actions: [SessionStateMachine<Answer>.Action]) {
        for action in actions {
            switch action {
            case .run(let index, let frame, let after): run(index, frame, after: after)
            case .connect(let index, let id, let request): connect(index, id, request)
            case .answer(let outcome): answer(outcome)
            case .end(let reason): control?.end(reason)
            }
        }
        if readPending, machine.wantsToRead, let context {
            readPending = false
            context.read()
        }
    }

    private func answer(_ outcome: SessionStateMachine<Answer>.Outcome) {
        switch outcome {
        case .answered(let answer):
            queue?.enqueue(answer.reply)
            for publication in answer.publications { environment.bus.publish(publication) }
        case .refused(let id, let error):
            environment.metrics.error(error.code)
            queue?.enqueue(environment.coder.encode(ServerFrame.error(id, error)))
        }
    }

    /// Runs a request: `ping` here, anything else in the runner, reporting back on this event loop. A send (a read)
    /// that follows the send (the read) `after` waits in the runner for that one's place in the commit order.
    private func run(_ index: Int, _ frame: ClientFrame, after: Int?) {
        guard let device, let eventLoop, let control else { return perform(machine.finished(index, nil)) }
        if case .ping(let id) = frame {
            let answer = ServerFrame.ack(id, .ping(PingAck(serverTime: environment.now())))
            // Its metrics and, at debug, its "Request answered" line, as every request has (answered on the loop).
            environment.record(frame, answer, took: .zero, logger: logger)
            return perform(machine.finished(index, (environment.coder.encode(answer), [])))
        }
        let session = NIOLoopBound(self, eventLoop: eventLoop)
        let (environment, logger) = (self.environment, self.logger)
        let follow = after.flatMap { placeGates[$0] }
        let gate: PipelineGate? = frame.pipelinesInStore ? PipelineGate() : nil
        if let gate { placeGates[index] = gate }
        let whenQueued: (@Sendable () -> Void)? = gate.map { gate in { @Sendable in gate.open() } }
        // A send waits for the send before it here; a read looks up what it names first and waits just before its
        // write (``ReadService``), so the lookups of a device's reads overlap.
        let waitsInService = frame.type == .read
        let place = StorePlace(
            after: waitsInService ? follow.map { follow in { @Sendable in await follow.wait() } } : nil,
            queued: whenQueued
        )
        let submitted = runner.submit(frame.onlyReads ? .reads : .writes) { @Sendable () async -> Void in
            // Opened at the latest when the send ends (one refused before the store never has a place in its order).
            defer { gate?.open() }
            if let follow, !waitsInService { await follow.wait() }
            // Once the server has decided to close (a device that does not read, say), requests read ahead are not
            // run.
            if control.dropsRequests {
                Self.handOff(to: eventLoop) { session.value.finished(index, nil) }
                return
            }
            let started = ContinuousClock.now
            let (reply, publications) = await environment.router.handle(
                frame,
                from: device,
                logger: logger,
                place: place
            )
            let text = environment.coder.encode(reply)
            environment.record(frame, reply, took: ContinuousClock.now - started, logger: logger)
            Self.handOff(to: eventLoop) { session.value.finished(index, (text, publications)) }
        }
        // The node is stopping: nothing runs any more.
        if !submitted {
            gate?.open()
            control.end(.shuttingDown)
            perform(machine.finished(index, nil))
        }
    }

    private func finished(_ index: Int, _ answer: Answer?) {
        placeGates[index] = nil
        perform(machine.finished(index, answer))
    }

    private func connect(_ index: Int, _ id: RequestID, _ request: ConnectRequest) {
        guard let context, let queue, let control else { return }
        let session = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (environment, peer, eventLoop) = (self.environment, self.peer, context.eventLoop)
        let submitted = runner.submit {
            let started = ContinuousClock.now
            let outcome = await SessionConnect(environment: environment, peer: peer)
                .connect(request, queue: queue, control: control)
            environment.metrics.request(.connect, took: ContinuousClock.now - started)
            Self.handOff(to: eventLoop) { session.value.connected(index, id, outcome) }
        }
        if !submitted { control.end(.shuttingDown) }
    }

    private func connected(_ index: Int, _ id: RequestID, _ outcome: SessionConnect.Outcome) {
        switch outcome {
        case .connected(let device, let expires, let ack):
            guard !machine.isEnded else {
                // Ended while it connected: the registration is undone.
                environment.registry.remove(device.connection, for: device.account)
                return perform(machine.connected(index, ("", [])))
            }
            self.device = device
            isRegistered = true
            environment.metrics.devicesOnline.increment()
            control?.authenticated(until: expires)
            logger[metadataKey: "courier.account"] = "\(device.account)"
            logger[metadataKey: "courier.device"] = "\(device.device)"
            logger.debug("Device connected")
            let reply = environment.coder.encode(ServerFrame.ack(id, .connect(ack)))
            perform(machine.connected(index, (reply, [])))
        case .refused(let error, let failures):
            if let failures { logFailedConnect(error, failures: failures) }
            perform(machine.connectRefused(index, error.wire, requestID: id, countsAsFailure: failures != nil))
        }
    }

    /// A refused token, with the client's address: the first few of an address each minute one by one, then one line
    /// when it reaches the limit and is throttled (``ConnectThrottle/loggedFailuresPerMinute``).
    private func logFailedConnect(_ error: RequestError, failures: Int) {
        let metadata: Logger.Metadata = ["error.code": "\(error.wire.code.rawValue)"]
        let limit = environment.connectThrottle.limitPerMinute
        if limit > 0, failures == limit {
            logger.warning("Client throttled: too many failed connects this minute", metadata: metadata)
        } else if failures <= ConnectThrottle.loggedFailuresPerMinute {
            logger.notice("Connect refused", metadata: metadata)
        }
    }

    /// Runs `body` on `eventLoop`: from the store's thread, with everything else its round answers on that loop, in
    /// one wake-up of the loop (ADR 0037).
    private static func handOff(to eventLoop: any EventLoop, _ body: @escaping @Sendable () -> Void) {
        StoreThread.handOff(to: eventLoop, deliver: { bodies in eventLoop.execute { for body in bodies { body() } } }, body)
    }

    // MARK: Ending

    /// The session ended (its control decided, or the connection closed): nothing more is run.
    private func ended(dropping: Bool) { perform(machine.end(dropping: dropping)) }

    /// Ends the session for `reason` (from any thread): a slow consumer is cut off at once (its writes may never
    /// complete, a close frame included); otherwise what is queued goes out (a refusal or notice among it), then the
    /// close frame, and a device that does not answer it within ``closeTimeout`` is cut off (unless the connection
    /// closed first).
    private static func end(
        for reason: SessionEndReason,
        queue: DeviceQueue,
        control: SessionControl,
        channel: any Channel,
        coder: FrameCoder,
        logger: Logger
    ) {
        guard reason != .closed else { return }
        logger.debug("Ending the session", metadata: ["courier.reason": "\(reason.rawValue)"])
        if reason == .slowConsumer {
            channel.close(promise: nil)
            return
        }
        // The reasons a device must act on come as an error frame first, without a request id.
        let notice: WireError? =
            switch reason {
            case .tokenExpired: WireError(code: .authTokenExpired, message: "The token has expired; connect with a new one.")
            case .tokenRevoked: WireError(code: .authTokenRevoked, message: "The token was revoked; connect with a new one.")
            case .accountDeactivated: WireError(code: .authAccountDeactivated, message: "This account was deactivated.")
            default: nil
            }
        if let notice { queue.enqueue(coder.encode(ServerFrame.error(nil, notice))) }
        queue.finish(closing: reason)
        control.deadline(in: closeTimeout) { channel.close(promise: nil) }
    }

    /// How long a device has to answer the server's close frame.
    static let closeTimeout = Duration.seconds(10)

    /// The peer's close frame: the handshake is complete when the server's went out first; otherwise the server
    /// answers with the same code and closes once it is written.
    private func peerClosed(_ frame: WebSocketFrame) {
        guard let context else { return }
        control?.end(.closed)
        if closeGuard?.closeSent == true {
            context.close(promise: nil)
            return
        }
        // The same code back (RFC 6455 §5.5.1), or 1002 for a close frame that breaks the rules: one byte of
        // payload, a code no endpoint may send (§7.4), a reason that is not UTF-8.
        var data = frame.unmaskedData
        var code: UInt16 = 1000
        if data.readableBytes == 1 {
            code = 1002
        } else if let sent = data.readInteger(as: UInt16.self) {
            let valid = (1000...1003).contains(sent) || (1007...1014).contains(sent) || (3000...4999).contains(sent)
            code = valid && String(validating: data.readableBytesView, as: UTF8.self) != nil ? sent : 1002
        }
        context.closeWebSocket(WebSocketErrorCode(codeNumber: Int(code)))
    }

    /// A message that breaks the protocol: the close frame with `code`, then the connection closes.
    private func fail(_ code: WebSocketErrorCode, _ reason: String) {
        guard let context else { return }
        message = nil
        control?.end(.closed)
        guard closeGuard?.closeSent != true else { return context.close(promise: nil) }
        context.closeWebSocket(code, reason: reason)
    }

    /// The request id of a frame too large to decode, when it comes in the frame's first 256 bytes as a JSON string
    /// of at most 64 characters without escapes (as `{"type": …, "id": "7", …}`, the order every client library
    /// here writes): the requester learns which request failed instead of waiting for an answer.
    static func requestID(atHeadOf text: String) -> RequestID? {
        let head = text.utf8.prefix(256)
        guard let match = String(decoding: head, as: UTF8.self).firstMatch(of: /"id"\s*:\s*"([^"\\]{1,64})"/) else {
            return nil
        }
        return RequestID(rawValue: String(match.output.1))
    }
}
