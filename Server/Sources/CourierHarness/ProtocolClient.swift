// Courier — Apache-2.0
public import CourierWire
internal import CourierSDK
internal import CourierStorage
internal import CourierDomain
internal import Foundation
internal import Synchronization

/// A lightweight protocol client: one WebSocket, requests matched to acks by id (several may be in flight), events
/// handed to a callback. No local store, so a load generator is not the bottleneck, and a test sees the wire as it
/// is.
public final class ProtocolClient: Sendable {
    private let outbound = Locked<(any TransportSender)?>(nil)
    private enum Slot {
        case waiting(CheckedContinuation<ServerFrame, any Error>?)
        case answered(ServerFrame)
    }
    private struct State {
        var slots: [Int: Slot] = [:]
        /// Set when the connection is gone: requests fail at once instead of waiting for an answer.
        var closed = false
    }
    private let state = Locked(State())
    private let nextID = Atomic<Int>(0)
    private let onEvent: @Sendable (ServerEvent) -> Void
    private let coder = FrameCoder()

    public init(onEvent: @escaping @Sendable (ServerEvent) -> Void = { _ in }) { self.onEvent = onEvent }

    /// Connects and authenticates, then runs `body`; the connection closes when `body` returns. Requests still
    /// waiting when the connection ends fail with ``HarnessError/closed``.
    public func run(
        url: String,
        token: String,
        account: AccountID,
        device: DeviceID,
        _ body: @escaping @Sendable () async throws -> Void
    )
        async throws
    {
        defer { failAll() }
        guard let endpoint = URL(string: url) else { throw HarnessError.refused("not a URL: \(url)") }
        // The SDK's transport: bounded handshake, cancellable in every phase, frames masked. The whole suite at once
        // shares two cores and one event loop group, whose queue can hold a loopback connect's completion past the
        // SDK's 10 s (the differential test failed so: `Connect timeout (10 s)`); a test's time limit bounds it.
        try await WebSocketTransport(handshakeTimeout: .seconds(60)).run(
            url: endpoint,
            receive: { text in self.receive(text) },
            session: { sender in
                self.outbound.withLock { $0 = sender }
                defer { self.failAll() }
                let reply = try await self.request {
                    .connect($0, ConnectRequest(token: token, account: account, device: device))
                }
                guard case .ack = reply else { throw HarnessError.refused("\(reply)") }
                try await body()
            }
        )
    }

    /// Sends `text` as one text frame, as it is (malformed input, say); what the server answers without a request id is
    /// not waited for.
    public func sendRaw(_ text: String) async throws {
        guard let writer = outbound.withLock({ $0 }) else { throw HarnessError.closed }
        try await writer.send(text)
    }

    /// Sends a request and waits for its `ack` or `error`.
    public func request(_ make: (RequestID) -> ClientFrame) async throws -> ServerFrame {
        try await reply(to: try await submit(make))
    }

    /// A request on the wire whose answer is still to be waited for (``reply(to:)``): pipelining, several in flight,
    /// written in the order submitted.
    public struct Pending: Sendable {
        fileprivate let id: Int
    }

    /// Sends a request without waiting for its answer; ``reply(to:)`` waits for it.
    public func submit(_ make: (RequestID) -> ClientFrame) async throws -> Pending {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let text = try coder.encode(make(RequestID(rawValue: String(id))))
        // Reserve the slot before writing: the answer may arrive before this task waits for it.
        let open = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.slots[id] = .waiting(nil)
            return true
        }
        guard open, let writer = outbound.withLock({ $0 }) else { throw HarnessError.closed }
        do {
            try await writer.send(text)
        } catch {
            state.withLock { _ = $0.slots.removeValue(forKey: id) }
            throw error
        }
        return Pending(id: id)
    }

    /// Waits for the `ack` or `error` of a submitted request.
    public func reply(to pending: Pending) async throws -> ServerFrame {
        let id = pending.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let answer = state.withLock { state -> Result<ServerFrame, any Error>? in
                    if case .answered(let frame) = state.slots[id] {
                        state.slots[id] = nil
                        return .success(frame)
                    }
                    guard !state.closed, state.slots[id] != nil else { return .failure(HarnessError.closed) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.slots[id] = .waiting(continuation)
                    return nil
                }
                if let answer { continuation.resume(with: answer) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<ServerFrame, any Error>? in
                guard case .waiting(let continuation?) = state.slots[id] else { return nil }
                state.slots[id] = nil
                return continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private func receive(_ text: String) {
        guard let frame = try? coder.decodeServerFrame(text) else { return }
        switch frame {
        case .ack(let id, _), .error(let id?, _):
            let key = Int(id.rawValue) ?? -1
            let waiter = state.withLock { state -> CheckedContinuation<ServerFrame, any Error>? in
                guard case .waiting(let continuation) = state.slots[key] else { return nil }
                guard let continuation else {
                    state.slots[key] = .answered(frame)
                    return nil
                }
                state.slots[key] = nil
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
        let waiting = state.withLock { state in
            defer {
                state.slots = [:]
                state.closed = true
            }
            return state.slots.values.compactMap { slot -> CheckedContinuation<ServerFrame, any Error>? in
                if case .waiting(let continuation) = slot { return continuation }
                return nil
            }
        }
        for continuation in waiting { continuation.resume(throwing: HarnessError.closed) }
    }
}
