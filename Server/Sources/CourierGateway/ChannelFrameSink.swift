// Courier — Apache-2.0
internal import CoreMetrics
internal import NIOCore
internal import NIOWebSocket
internal import CourierServerCore

/// A device's frames written to its WebSocket straight from its queue (``DeviceQueue``), on the connection's event
/// loop: no task waits for them, and the frames queued by the time the loop gets to them go out with one flush. The
/// close frame goes out the same way, after them; ``CloseFrameGuard`` refuses anything written after it.
struct ChannelFrameSink: FrameSink {
    let channel: any Channel
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

    /// The close frame, with the reason's code and the reason; the device answers with its own and the session closes the connection
    /// (or its control does, after ``SessionHandler/closeTimeout``).
    func close(for reason: SessionEndReason) {
        var payload = channel.allocator.buffer(capacity: 2 + reason.rawValue.utf8.count)
        payload.writeInteger(reason.closeCode)
        payload.writeString(reason.rawValue)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload), promise: nil)
    }
}
