// Courier — Apache-2.0
public import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import Synchronization
internal import WSClient

/// A lightweight protocol client: one WebSocket, requests matched to acks by id (several may be in flight), events
/// handed to a callback. No local store, so a load generator is not the bottleneck, and a test sees the wire as it
/// is.
public final class ProtocolClient: Sendable {
    private let outbound = Mutex<WebSocketOutboundWriter?>(nil)
    private enum Slot {
        case waiting(CheckedContinuation<ServerFrame, any Error>?)
        case answered(ServerFrame)
    }
    private let pending = Mutex<[Int: Slot]>([:])
    private let nextID = Atomic<Int>(0)
    private let onEvent: @Sendable (ServerEvent) -> Void
    private let coder = FrameCoder()

    public init(onEvent: @escaping @Sendable (ServerEvent) -> Void = { _ in }) { self.onEvent = onEvent }

    /// Connects and authenticates, then runs `body`; the connection closes when `body` returns.
    public func run(
        url: String,
        token: String,
        account: AccountID,
        device: DeviceID,
        _ body: @escaping @Sendable () async throws -> Void
    )
        async throws
    {
        let logger = Logger(label: "courier.bench", factory: { _ in SwiftLogNoOpLogHandler() })
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 64 << 20), logger: logger) {
            inbound,
            outbound,
            _ in
            self.outbound.withLock { $0 = outbound }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: 64 << 20) {
                        if case .text(let text) = message { self.receive(text) }
                    }
                    self.failAll()
                }
                let reply = try await self.request {
                    .connect($0, ConnectRequest(token: token, account: account, device: device))
                }
                guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                try await body()
                group.cancelAll()
            }
        }
    }

    /// Sends a request and waits for its `ack` or `error`.
    public func request(_ make: (RequestID) -> ClientFrame) async throws -> ServerFrame {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let text = try coder.encode(make(RequestID(rawValue: String(id))))
        // Reserve the slot before writing: the answer may arrive before this task waits for it.
        pending.withLock { $0[id] = .waiting(nil) }
        guard let writer = outbound.withLock({ $0 }) else { throw HarnessError.closed }
        do {
            try await writer.write(.text(text))
        } catch {
            pending.withLock { _ = $0.removeValue(forKey: id) }
            throw error
        }
        return try await withCheckedThrowingContinuation { continuation in
            let answer = pending.withLock { pending -> ServerFrame? in
                if case .answered(let frame) = pending[id] {
                    pending[id] = nil
                    return frame
                }
                pending[id] = .waiting(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    private func receive(_ text: String) {
        guard let frame = try? coder.decodeServerFrame(text) else { return }
        switch frame {
        case .ack(let id, _), .error(let id?, _):
            let key = Int(id.rawValue) ?? -1
            let waiter = pending.withLock { pending -> CheckedContinuation<ServerFrame, any Error>? in
                guard case .waiting(let continuation) = pending[key] else { return nil }
                guard let continuation else {
                    pending[key] = .answered(frame)
                    return nil
                }
                pending[key] = nil
                return continuation
            }
            waiter?.resume(returning: frame)
        case .error(nil, _):
            break
        case .event(let event):
            onEvent(event)
        }
    }

    private func failAll() {
        let waiting = pending.withLock { pending in
            defer { pending = [:] }
            return pending.values.compactMap { slot -> CheckedContinuation<ServerFrame, any Error>? in
                if case .waiting(let continuation) = slot { return continuation }
                return nil
            }
        }
        for continuation in waiting { continuation.resume(throwing: HarnessError.closed) }
    }
}
