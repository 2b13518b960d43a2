// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import HummingbirdWebSocket
internal import Logging
internal import NIOCore
internal import NIOWebSocket
internal import ServiceLifecycle
internal import Synchronization

/// One WebSocket connection of one device: an inbound loop that answers requests in order, and an outbound task
/// that drains the device's bounded queue (acks and events share it, so each device sees them in order).
struct Session: Sendable {
    let environment: GatewayEnvironment

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger) async throws {
        let outbox = DeviceOutbox(capacity: environment.limits.outboundQueueFrames)
        let authenticated = AuthenticationFlag()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await frame in outbox.frames { try await outbound.write(.text(frame)) }
                if outbox.hasOverflowed {
                    logger.notice("Disconnecting slow device")
                    try await outbound.close(.policyViolation, reason: "courier.slowConsumer")
                }
            }
            group.addTask {
                try await Task.sleep(for: environment.limits.authTimeout)
                if !authenticated.isSet { try await outbound.close(.policyViolation, reason: "auth.timeout") }
            }
            do {
                // Graceful shutdown (SIGTERM) ends every session; devices reconnect elsewhere and sync.
                try await cancelWhenGracefulShutdown {
                    try await readLoop(inbound, outbox: outbox, authenticated: authenticated, logger: logger)
                }
            } catch {
                logger.debug("Connection closed", metadata: ["error.type": "\(type(of: error))"])
            }
            outbox.finish()
            group.cancelAll()
        }
    }

    /// Answers the device's requests in order until the connection closes.
    private func readLoop(
        _ inbound: WebSocketInboundStream,
        outbox: DeviceOutbox,
        authenticated: AuthenticationFlag,
        logger: Logger
    ) async throws {
        var state = InboundState(outbox: outbox, logger: logger)
        defer {
            if let device = state.device { environment.registry.remove(device.connection, for: device.account) }
        }
        for try await message in inbound.messages(maxSize: environment.limits.hardFrameBytes) {
            await handle(message, state: &state)
            if state.device != nil { authenticated.set() }
        }
    }

    struct InboundState {
        let outbox: DeviceOutbox
        var logger: Logger
        var device: DeviceContext?
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
            state.outbox.enqueue(coder.encode(ServerFrame.error(rejection.requestID, rejection.error)))
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
            let account = try await environment.tokens.verify(request.token)
            if let claimed = request.account, claimed != account {
                throw RequestError(.authAccountMismatch, "The token is for another account than '\(claimed)'.")
            }
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

/// Set once the connection has authenticated (read by the auth-timeout task).
final class AuthenticationFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// What every session shares.
struct GatewayEnvironment: Sendable {
    let store: any CourierStore
    let registry: ConnectionRegistry
    let bus: any EventBus
    let tokens: TokenAuthority
    let router: FrameRouter
    let limits: CourierServerConfiguration.Limits
    let serverLimits: ServerLimits
    let readReceiptPolicy: ReadReceiptPolicy
    let now: @Sendable () -> Timestamp
    let coder = FrameCoder()
}
