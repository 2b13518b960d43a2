// Courier — Apache-2.0
internal import CoreMetrics
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import HummingbirdWebSocket
internal import Logging
internal import NIOCore
internal import NIOWebSocket
internal import ServiceLifecycle

/// One WebSocket connection of one device: an inbound loop that reads requests and answers them in order (the
/// session's own task, with up to `maxRequestsInFlight` requests under way at once: ``RequestPipeline``), and the
/// device's bounded queue, drained on the connection's event loop (acks and events share it, so each device sees
/// them in order). ``SessionControl`` says when the session must end — its authentication time or its token ran out,
/// its queue overflowed, it failed `connect` too often, or the server is stopping — and its handler ends it:
/// event-loop timers and a callback, no task of their own.
struct Session: Sendable {
    let environment: GatewayEnvironment
    /// The peer's address (for throttling failed connects); `nil` when unknown.
    let peer: String?
    /// The connection: its event loop runs the session's timers and writes its frames.
    let channel: any Channel

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger) async throws {
        let limits = environment.limits
        let metrics = environment.metrics
        let control = SessionControl(eventLoop: channel.eventLoop, authTimeout: limits.authTimeout)
        let queue = DeviceQueue(
            capacity: limits.outboundQueueFrames,
            maxBytes: limits.outboundQueueBytes,
            sink: ChannelFrameSink(channel: channel, outbound: outbound, framesOut: metrics.framesOut),
            coder: environment.coder
        ) {
            metrics.slowConsumerDisconnects.increment()
            control.end(.slowConsumer)
        }
        // The handler holds what ending needs, not the session (its environment is large, and it lives as long as the
        // connection).
        // Closing at once, without a close frame (for a device that does not read), may fail when the connection is
        // already closed: either way it is closed.
        let (channel, coder) = (self.channel, environment.coder)
        let abort: @Sendable () async -> Void = { try? await channel.close() }
        control.onEnd { reason in
            Self.end(for: reason, queue: queue, control: control, abort: abort, coder: coder, logger: logger)
        }
        metrics.connections.increment()
        defer {
            control.stop()
            metrics.connections.decrement()
        }
        // What was queued before the session ended still goes out; nothing queued after it does.
        defer { queue.finish() }
        do {
            // Graceful shutdown (SIGTERM) ends every session; devices reconnect elsewhere and sync.
            try await withGracefulShutdownHandler {
                try await readLoop(inbound, queue: queue, control: control, logger: logger)
            } onGracefulShutdown: {
                control.end(.shuttingDown)
            }
        } catch is CancellationError {
            // Cancelled with its task tree: the server is stopping.
        } catch {
            // The WebSocket layer closes with the code the failure carries: 1007 for invalid UTF-8, 1009 for a
            // message over the size limit, 1002 for a protocol error.
            logger.debug("Connection failed", metadata: ["error.type": "\(type(of: error))"])
            throw error
        }
    }

    /// Ends the session for `reason`: a slow consumer is cut off at once (its writes may never complete, a close frame
    /// included); otherwise what is queued goes out (a refusal or notice among it), then the close frame, and a device
    /// that does not answer it within `closeTimeout` is cut off (unless the connection closed first).
    private static func end(
        for reason: SessionEndReason,
        queue: DeviceQueue,
        control: SessionControl,
        abort: @escaping @Sendable () async -> Void,
        coder: FrameCoder,
        logger: Logger
    ) {
        guard reason != .closed else { return }
        logger.debug("Ending the session", metadata: ["courier.reason": "\(reason.rawValue)"])
        if reason == .slowConsumer {
            Task { await abort() }
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
        control.deadline(in: Self.closeTimeout) { Task { await abort() } }
    }

    /// How long a device has to answer the server's close frame.
    static let closeTimeout = Duration.seconds(10)

    /// Answers the device's requests in order until the connection closes. An authenticated device's requests are
    /// pipelined: each runs in a task of the loop's group as soon as what it follows allows (``RequestPipeline``), up
    /// to `maxRequestsInFlight` at once; anything else (`connect`, a frame refused before it is a request) waits until
    /// every request before it is answered, and is answered by the loop itself.
    private func readLoop(
        _ inbound: WebSocketInboundStream,
        queue: DeviceQueue,
        control: SessionControl,
        logger: Logger
    ) async throws {
        var state = InboundState(queue: queue, control: control, logger: logger)
        defer {
            if let device = state.device {
                environment.registry.remove(device.connection, for: device.account)
                environment.metrics.devicesOnline.decrement()
            }
        }
        let window = environment.limits.maxRequestsInFlight
        try await withThrowingTaskGroup(of: InboundState?.self) { group in
            var pipeline = RequestPipeline()
            var inFlight = 0
            for try await message in inbound.messages(maxSize: environment.limits.hardFrameBytes) {
                // Once the server has decided to close, what the device still sends is not answered.
                guard !control.hasEnded else { continue }
                if let device = state.device, case .text(let text) = message,
                    text.utf8.count <= environment.limits.maxFrameBytes,
                    case .success(let frame) = environment.coder.decodeClientFrame(text),
                    frame.type != .connect
                {
                    if inFlight >= window {
                        _ = try await group.next()
                        inFlight -= 1
                    }
                    let (runAfter, answerAfter, step) = pipeline.schedule(frame)
                    let logger = state.logger
                    group.addTask {
                        await process(
                            frame,
                            from: device,
                            runAfter: runAfter,
                            answerAfter: answerAfter,
                            step: step,
                            queue: queue,
                            control: control,
                            logger: logger
                        )
                        return nil
                    }
                    inFlight += 1
                    continue
                }
                try await group.waitForAll()
                inFlight = 0
                pipeline.reset()
                // In a task of its own, as requests are: the frames of `connect`'s path (token checks, registration:
                // the deepest the connection runs) are freed when it ends, instead of staying with the connection's
                // task for as long as the device is connected (docs/benchmarks-history.md, "Idle connections").
                group.addTask { [state] in
                    var state = state
                    await handle(message, state: &state)
                    return state
                }
                if case let handled?? = try await group.next() { state = handled }
                if state.failedConnects >= environment.limits.failedConnectsPerConnection {
                    control.end(.tooManyFailedConnects)
                }
            }
            try await group.waitForAll()
        }
    }

    /// One pipelined request: runs once what it follows has run, and is answered — its reply queued, then its events
    /// published — once the request before it is.
    private func process(
        _ frame: ClientFrame,
        from device: DeviceContext,
        runAfter: [PipelineGate],
        answerAfter: PipelineGate?,
        step: PipelineStep,
        queue: DeviceQueue,
        control: SessionControl,
        logger: Logger
    ) async {
        defer { step.answered.open() }
        environment.metrics.frameIn(frame.type)
        for gate in runAfter { await gate.wait() }
        // Once the server has decided to close (a device that does not read, say), requests read ahead are not run.
        guard !control.hasEnded else {
            step.queued.open()
            step.executed.open()
            return
        }
        let started = ContinuousClock.now
        let queued = step.queued
        let (reply, publications) = await environment.router.handle(
            frame,
            from: device,
            logger: logger,
            whenQueued: { queued.open() }
        )
        queued.open()
        step.executed.open()
        let text = environment.coder.encode(reply)
        record(frame, reply, took: ContinuousClock.now - started, logger: logger)
        await answerAfter?.wait()
        queue.enqueue(text)
        for publication in publications { await environment.bus.publish(publication) }
    }

    /// Metrics and the debug line of an answered request.
    private func record(_ frame: ClientFrame, _ reply: ServerFrame, took: Duration, logger: Logger) {
        let metrics = environment.metrics
        metrics.request(frame.type, took: took)
        // Request ids go into the lines that name them, not into a logger copied per request (a per-message cost).
        if logger.logLevel <= .debug {
            var outcome = "ack"
            if case .error(_, let error) = reply { outcome = error.code.rawValue }
            logger.debug(
                "Request answered",
                metadata: [
                    "courier.request.id": "\(frame.requestID)", "courier.request.type": "\(frame.type)",
                    "courier.outcome": "\(outcome)", "courier.duration.ms": .stringConvertible(took.fractionalMilliseconds),
                ]
            )
        }
        switch reply {
        case .error(_, let error): metrics.error(error.code)
        case .ack(_, .sync(let page)):
            metrics.syncPages.increment()
            metrics.syncMessages.increment(by: page.messages.count)
        default: break
        }
    }

    struct InboundState: Sendable {
        let queue: DeviceQueue
        let control: SessionControl
        var logger: Logger
        var device: DeviceContext?
        var failedConnects = 0
    }

    private func handle(_ message: WebSocketMessage, state: inout InboundState) async {
        let coder = environment.coder
        let metrics = environment.metrics
        guard case .text(let text) = message else {
            metrics.frameIn(nil)
            metrics.error(.frameInvalid)
            state.queue.enqueue(
                errorFrame(nil, .frameInvalid, "Frames are JSON text; binary messages are not accepted.")
            )
            return
        }
        guard text.utf8.count <= environment.limits.maxFrameBytes else {
            let limit = environment.limits.maxFrameBytes
            metrics.frameIn(nil)
            metrics.error(.frameTooLarge)
            state.queue.enqueue(
                errorFrame(Self.requestID(atHeadOf: text), .frameTooLarge, "The frame exceeds \(limit) bytes.")
            )
            return
        }
        let frame: ClientFrame
        switch coder.decodeClientFrame(text) {
        case .failure(let rejection):
            metrics.frameIn(nil)
            // Before `connect`, a frame of any other type is refused for that, whatever else is wrong with it.
            if state.device == nil, let type = rejection.type, type != .connect {
                metrics.error(.authRequired)
                state.queue.enqueue(errorFrame(rejection.requestID, .authRequired, "Send 'connect' with a token first."))
            } else {
                metrics.error(rejection.error.code)
                state.queue.enqueue(coder.encode(ServerFrame.error(rejection.requestID, rejection.error)))
            }
            return
        case .success(let decoded):
            frame = decoded
        }
        metrics.frameIn(frame.type)
        let started = ContinuousClock.now
        if case .connect(let id, let request) = frame, state.device == nil {
            await connect(id, request, state: &state)
            metrics.request(.connect, took: ContinuousClock.now - started)
            return
        }
        guard let device = state.device else {
            metrics.error(.authRequired)
            state.queue.enqueue(errorFrame(frame.requestID, .authRequired, "Send 'connect' with a token first."))
            return
        }
        let (reply, publications) = await environment.router.handle(frame, from: device, logger: state.logger)
        record(frame, reply, took: ContinuousClock.now - started, logger: state.logger)
        state.queue.enqueue(coder.encode(reply))
        for publication in publications { await environment.bus.publish(publication) }
    }

    private func connect(_ id: RequestID, _ request: ConnectRequest, state: inout InboundState) async {
        do throws(RequestError) {
            if let peer, environment.connectThrottle.isThrottled(peer) {
                throw RequestError(.authThrottled, "Too many failed connects from this address; try again later.")
            }
            let token: VerifiedToken
            do throws(RequestError) {
                token = try await environment.tokens.verify(request.token)
                if let claimed = request.account, claimed != token.account {
                    throw RequestError(.authAccountMismatch, "The token is for another account than '\(claimed)'.")
                }
            } catch {
                state.failedConnects += 1
                if let peer { environment.connectThrottle.recordFailure(peer) }
                throw error
            }
            let account = token.account
            guard request.device.isValid else {
                throw RequestError(.invalidArgument, "device must be 1–128 characters of [A-Za-z0-9._@-].")
            }
            // Registering is a durable write; a known account (nearly every connect) only needs a read, which also
            // says whether it may connect.
            let status: AccountStatus?
            do {
                status = try await environment.store.accountStatus(account)
                if status == nil { try await environment.store.registerAccount(account, at: environment.now()) }
            } catch {
                throw RequestError(error)
            }
            if let refusal = status?.refusal(tokenIssuedAt: token.issuedAt) { throw refusal }
            let connection = environment.registry.add(
                state.queue,
                control: state.control,
                tokenIssuedAt: token.issuedAt,
                device: request.device,
                at: environment.now(),
                for: account
            )
            // A deactivation or a revocation committed between the read above and the registration found no session
            // to end: read again now that this one is registered (any later one finds it). Where nodes share the
            // store, the same transaction records the connection (``DevicePresence``).
            let refusal: RequestError?
            do {
                let status =
                    if let presence = environment.registry.presence {
                        try await presence.store.recordConnected(
                            Int64(connection.rawValue),
                            account: account,
                            device: request.device,
                            at: environment.now()
                        )
                    } else {
                        try await environment.store.accountStatus(account)
                    }
                refusal = status?.refusal(tokenIssuedAt: token.issuedAt)
            } catch {
                environment.registry.remove(connection, for: account)
                throw RequestError(error)
            }
            if let refusal {
                environment.registry.remove(connection, for: account)
                throw refusal
            }
            // Ended while its record was being written: the end's own record may have gone first.
            if !environment.registry.contains(connection, for: account) {
                environment.registry.presence?.ended([connection])
            }
            environment.metrics.devicesOnline.increment()
            state.device = DeviceContext(account: account, device: request.device, connection: connection)
            state.control.authenticated(until: token.expires)
            state.logger[metadataKey: "courier.account"] = "\(account)"
            state.logger[metadataKey: "courier.device"] = "\(request.device)"
            state.logger.debug("Device connected")
            let ack = ConnectAck(
                account: account,
                device: request.device,
                serverTime: environment.now(),
                limits: environment.serverLimits,
                readReceiptPolicy: environment.readReceiptPolicy
            )
            state.queue.enqueue(environment.coder.encode(ServerFrame.ack(id, .connect(ack))))
        } catch {
            environment.metrics.error(error.code)
            state.queue.enqueue(errorFrame(id, error.code, error.message))
        }
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

    private func errorFrame(_ id: RequestID?, _ code: ErrorCode, _ message: String) -> String {
        environment.coder.encode(ServerFrame.error(id, WireError(code: code, message: message)))
    }
}

extension Duration {
    /// In milliseconds, to the microsecond (for logs).
    var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds * 1_000_000 + attoseconds / 1_000_000_000_000) / 1000
    }
}
