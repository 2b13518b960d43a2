import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

// Courier — Apache-2.0
@testable import CourierGateway
@testable import CourierServerCore

/// RFC 6455 §5.5.1: after the server's close frame, nothing. The device's queue writes into the channel directly
/// (ADR 0022); the guard sits between every writer and the frame encoder, so what leaves the pipeline is checked here
/// as bytes on the wire.
@Suite("Close frame guard")
struct CloseFrameGuardTests {
    func text(_ string: String) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: string))
    }

    /// The frames written to the wire, decoded back from their bytes.
    func wireFrames(_ channel: EmbeddedChannel) throws -> [WebSocketFrame] {
        let reader = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        while let chunk = try channel.readOutbound(as: ByteBuffer.self) { try reader.writeInbound(chunk) }
        var frames: [WebSocketFrame] = []
        while let frame = try reader.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    @Test("a frame written after the close frame fails and never reaches the wire; frames before it do")
    func nothingAfterClose() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        try channel.pipeline.syncOperations.addHandler(CloseFrameGuard())
        let before = channel.write(text("answer 1"))
        var reason = ByteBuffer()
        reason.write(webSocketErrorCode: .policyViolation)
        let close = channel.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: reason))
        let after = channel.write(text("answer 2"))
        channel.flush()
        #expect(throws: Never.self) { try before.wait() }
        #expect(throws: Never.self) { try close.wait() }
        #expect(throws: ChannelError.self) { try after.wait() }
        let wire = try wireFrames(channel)
        #expect(wire.map(\.opcode) == [.text, .connectionClose])
        #expect(String(buffer: wire[0].unmaskedData) == "answer 1")
    }
}
