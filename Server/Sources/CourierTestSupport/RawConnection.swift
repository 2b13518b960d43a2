// Courier — Apache-2.0
public import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import WSClient

/// A bare protocol connection for tests that send frames an SDK never would (malformed JSON, bad tokens, …).
public struct RawConnection: Sendable {
    let outbound: WebSocketOutboundWriter
    let frames: AsyncStream<String>
    let coder = FrameCoder()

    /// Sends raw text as one WebSocket text message.
    public func send(text: String) async throws { try await outbound.write(.text(text)) }

    /// Sends a frame.
    public func send(_ frame: ClientFrame) async throws { try await send(text: try coder.encode(frame)) }

    /// The next frame from the server (`nil` once the connection closed).
    public func next() async throws -> ServerFrame? {
        var iterator = frames.makeAsyncIterator()
        guard let text = await iterator.next() else { return nil }
        return try coder.decodeServerFrame(text)
    }

    /// Sends `frame` and returns the next frame that answers it (events in between are skipped).
    public func request(_ frame: ClientFrame) async throws -> ServerFrame? {
        try await send(frame)
        return try await answer(to: frame.requestID)
    }

    /// The next `ack` or `error` with `id` (events in between are skipped).
    public func answer(to id: RequestID?) async throws -> ServerFrame? {
        while let frame = try await next() {
            switch frame {
            case .ack(let ackID, _) where ackID == id: return frame
            case .error(let errorID, _) where errorID == id: return frame
            default: continue
            }
        }
        return nil
    }

    /// Authenticates as `account` with a token from `server`.
    public func connect(
        as account: AccountID,
        server: TestServer,
        device: DeviceID = "raw"
    ) async throws -> ServerFrame? {
        let token = try await server.token(for: account)
        return try await request(.connect("connect", ConnectRequest(token: token, account: account, device: device)))
    }
}

extension TestServer {
    /// Opens a raw WebSocket to the server, runs `body`, then closes it.
    public func withRawConnection<T: Sendable>(
        _ body: @escaping @Sendable (RawConnection) async throws -> T
    )
        async throws -> T
    {
        let (frames, continuation) = AsyncStream.makeStream(of: String.self)
        let result = ResultBox<T>()
        let logger = Logger(label: "courier.test.raw", factory: { _ in SwiftLogNoOpLogHandler() })
        try await WebSocketClient.connect(
            url: webSocketURL.absoluteString,
            configuration: .init(maxFrameSize: 64 << 20),
            logger: logger
        ) { inbound, outbound, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: 64 << 20) {
                        if case .text(let text) = message { continuation.yield(text) }
                    }
                    continuation.finish()
                }
                result.set(try await body(RawConnection(outbound: outbound, frames: frames)))
                group.cancelAll()
            }
        }
        return try result.get()
    }
}
