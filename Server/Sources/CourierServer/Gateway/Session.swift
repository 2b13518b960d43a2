// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Foundation
internal import HummingbirdWebSocket
internal import Logging
internal import NIOCore
internal import NIOWebSocket
internal import ServiceLifecycle

/// One WebSocket connection of one device: an inbound loop that answers requests in order, an outbound task that
/// drains the device's bounded queue (acks and events share it, so each device sees them in order), and a deadline
/// task that closes the connection when it does not authenticate in time or when its token expires.
struct Session: Sendable {
    let environment: GatewayEnvironment
    /// The peer's address (for throttling failed connects); `nil` when unknown.
    let peer: String?
    /// Closes the connection at once, without a close frame (for a device that does not read).
    let abort: @Sendable () async -> Void

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger) async throws {
        let limits = environment.limits
        let control = SessionControl()
        let outbox = DeviceOutbox(capacity: limits.outboundQueueFrames, maxBytes: limits.outboundQueueBytes) {
            control.end(.slowConsumer)
        }
        try await withThrowingTaskGroup(of: SessionPart.self) { group in
            group.addTask {
                for await frame in outbox.frames {
                    try await outbound.write(.text(frame))
                    outbox.sent(frame)
                }
                if let reason = outbox.closing { try await outbound.close(.policyViolation, reason: reason.rawValue) }
                return .writer
            }
            group.addTask { .ended(await control.run(authTimeout: limits.authTimeout)) }
            group.addTask {
                // Graceful shutdown (SIGTERM) ends every session; devices reconnect elsewhere and sync.
                try await cancelWhenGracefulShutdown {
                    try await readLoop(inbound, outbox: outbox, control: control, logger: logger)
                }
                return .reader
            }
            defer {
                outbox.finish()
                group.cancelAll()
            }
            do {
                try await supervise(&group, outbox: outbox, logger: logger)
            } catch is CancellationError {
                // Cancelled with its task tree: the server is stopping.
            } catch {
                // The WebSocket layer closes with the code the failure carries: 1007 for invalid UTF-8, 1009 for a
                // message over the size limit, 1002 for a protocol error.
                logger.debug("Connection failed", metadata: ["error.type": "\(type(of: error))"])
                throw error
            }
            if Task.isShuttingDownGracefully {
                try? await outbound.close(.goingAway, reason: "server.shuttingDown")
            }
        }
    }

    /// Waits for the first part of the session to end and ends the session accordingly.
    private func supervise(
        _ group: inout ThrowingTaskGroup<SessionPart, any Error>,
        outbox: DeviceOutbox,
        logger: Logger
    ) async throws {
        let first = try await group.next()
        // The writer can be first to end on an overflow (its queue finished while a write was in flight).
        if first == .writer, outbox.hasOverflowed { return await abort() }
        guard case .ended(let reason) = first else { return }
        logger.debug("Ending the session", metadata: ["courier.reason": "\(reason.rawValue)"])
        // A slow consumer is cut off at once: its writes may never complete, a close frame included.
        if reason == .slowConsumer { return await abort() }
        guard reason != .closed else { return }
        if reason == .tokenExpired {
            let error = WireError(code: .authTokenExpired, message: "The token has expired; connect with a new one.")
            outbox.enqueue(environment.coder.encode(ServerFrame.error(nil, error)))
        }
        // The writer sends what is queued (the refusal or notice among it), then the close frame; the reader ends
        // when the device answers it. A device that does not is cut off after `closeTimeout`.
        outbox.finish(closing: reason)
        group.addTask {
            try await Task.sleep(for: Self.closeTimeout)
            return .closeTimeout
        }
        while let part = try await group.next() {
            if part == .reader { return }
            if part == .closeTimeout { return await abort() }
        }
    }

    /// How long a device has to answer the server's close frame.
    static let closeTimeout = Duration.seconds(10)

    /// Answers the device's requests in order until the connection closes.
    private func readLoop(
        _ inbound: WebSocketInboundStream,
        outbox: DeviceOutbox,
        control: SessionControl,
        logger: Logger
    ) async throws {
        var state = InboundState(outbox: outbox, control: control, logger: logger)
        defer {
            if let device = state.device { environment.registry.remove(device.connection, for: device.account) }
        }
        for try await message in inbound.messages(maxSize: environment.limits.hardFrameBytes) {
            // Once the server has decided to close, what the device still sends is not answered.
            guard !control.hasEnded else { continue }
            await handle(message, state: &state)
            if state.failedConnects >= environment.limits.failedConnectsPerConnection {
                control.end(.tooManyFailedConnects)
            }
        }
    }

    struct InboundState {
        let outbox: DeviceOutbox
        let control: SessionControl
        var logger: Logger
        var device: DeviceContext?
        var failedConnects = 0
    }

    private func handle(_ message: WebSocketMessage, state: inout InboundState) async {
        let coder = environment.coder
        guard case .text(let text) = message else {
            state.outbox.enqueue(
                errorFrame(nil, .frameInvalid, "Frames are JSON text; binary messages are not accepted.")
            )
            return
        }
        guard text.utf8.count <= environment.limits.maxFrameBytes else {
            let limit = environment.limits.maxFrameBytes
            state.outbox.enqueue(errorFrame(nil, .frameTooLarge, "The frame exceeds \(limit) bytes."))
            return
        }
        let frame: ClientFrame
        switch coder.decodeClientFrame(text) {
        case .failure(let rejection):
            // Before `connect`, a frame of any other type is refused for that, whatever else is wrong with it.
            if state.device == nil, let type = rejection.type, type != .connect {
                state.outbox.enqueue(errorFrame(rejection.requestID, .authRequired, "Send 'connect' with a token first."))
            } else {
                state.outbox.enqueue(coder.encode(ServerFrame.error(rejection.requestID, rejection.error)))
            }
            return
        case .success(let decoded):
            frame = decoded
        }
        if case .connect(let id, let request) = frame, state.device == nil {
            await connect(id, request, state: &state)
            return
        }
        guard let device = state.device else {
            state.outbox.enqueue(errorFrame(frame.requestID, .authRequired, "Send 'connect' with a token first."))
            return
        }
        let (reply, publications) = await environment.router.handle(frame, from: device, logger: state.logger)
        state.outbox.enqueue(coder.encode(reply))
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
            do {
                // Registering is a durable write; a known account (nearly every connect) only needs a read.
                if try await !environment.store.accountExists(account) {
                    try await environment.store.registerAccount(account, at: environment.now())
                }
            } catch {
                throw RequestError(error)
            }
            let connection = environment.registry.add(state.outbox, for: account)
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
            state.outbox.enqueue(environment.coder.encode(ServerFrame.ack(id, .connect(ack))))
        } catch {
            state.outbox.enqueue(errorFrame(id, error.code, error.message))
        }
    }

    private func errorFrame(_ id: RequestID?, _ code: ErrorCode, _ message: String) -> String {
        environment.coder.encode(ServerFrame.error(id, WireError(code: code, message: message)))
    }
}

/// The parts of a session's task tree.
enum SessionPart: Equatable, Sendable {
    case writer
    case reader
    case ended(SessionEndReason)
    case closeTimeout
}

/// What every session shares.
struct GatewayEnvironment: Sendable {
    let store: any CourierStore
    let registry: ConnectionRegistry
    let bus: any EventBus
    let tokens: TokenAuthority
    let connectThrottle: ConnectThrottle
    let router: FrameRouter
    let limits: CourierServerConfiguration.Limits
    let serverLimits: ServerLimits
    let readReceiptPolicy: ReadReceiptPolicy
    let now: @Sendable () -> Timestamp
    let coder = FrameCoder()
}
