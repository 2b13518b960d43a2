// Courier — Apache-2.0
public import Foundation
internal import Logging
internal import NIOCore
internal import WSClient

/// The default transport: one WebSocket per device, through swift-websocket's `WSClient`.
public struct WebSocketTransport: Transport {
    /// The largest frame accepted from the server (sync pages can be large).
    public var maxFrameBytes: Int

    public init(maxFrameBytes: Int = 64 << 20) { self.maxFrameBytes = maxFrameBytes }

    public func run(
        url: URL,
        receive: @escaping @Sendable (String) async -> Void,
        session: @escaping @Sendable (any TransportSender) async throws -> Void
    ) async throws {
        let maxFrameBytes = self.maxFrameBytes
        let configuration = WebSocketClientConfiguration(maxFrameSize: maxFrameBytes)
        let logger = Logger(label: "courier.transport", factory: { _ in SwiftLogNoOpLogHandler() })
        try await WebSocketClient.connect(url: url.absoluteString, configuration: configuration, logger: logger) {
            inbound,
            outbound,
            _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: maxFrameBytes) {
                        if case .text(let text) = message { await receive(text) }
                    }
                    throw TransportClosed()
                }
                group.addTask {
                    try await session(Sender(outbound: outbound))
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
    }

    struct Sender: TransportSender {
        let outbound: WebSocketOutboundWriter
        func send(_ text: String) async throws { try await outbound.write(.text(text)) }
    }
}
