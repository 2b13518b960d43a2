// Courier — Apache-2.0
internal import CoreMetrics
internal import HummingbirdWebSocket
internal import NIOCore
internal import NIOWebSocket

/// A device's frames written to its WebSocket straight from its queue (``DeviceQueue``), on the connection's event
/// loop: no task per connection waits for them, and the frames queued by the time the loop gets to them go out with one
/// flush. The close frame goes through Hummingbird's writer, so that its closing handshake knows of it.
struct ChannelFrameSink: FrameSink {
    let channel: any Channel
    let outbound: WebSocketOutboundWriter
    let framesOut: CoreMetrics.Counter

    func schedule(_ body: @escaping @Sendable () -> Void) { channel.eventLoop.execute(body) }

    func write(_ frames: [String], written: @escaping @Sendable () -> Void) {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        for (index, frame) in frames.enumerated() {
            let data = channel.allocator.buffer(string: frame)
            let frame = WebSocketFrame(fin: true, opcode: .text, data: data)
            channel.write(frame, promise: index == frames.count - 1 ? promise : nil)
        }
        channel.flush()
        // Writes complete in order: the last one done, they all are.
        promise.futureResult.whenComplete { _ in written() }
        framesOut.increment(by: Int64(frames.count))
    }

    func close(for reason: SessionEndReason) {
        let outbound = outbound
        Task { try? await outbound.close(.policyViolation, reason: reason.rawValue) }
    }
}
