// Courier — Apache-2.0
internal import Foundation

/// Encodes and decodes frames as the protocol specifies (UTF-8 JSON text, keys sorted for stable output; a client
/// frame's `type` and `id` first).
public struct FrameCoder: Sendable {
    public init() {}

    /// Encodes a frame to the JSON text sent in one WebSocket text message.
    public func encode<Frame: Encodable>(_ frame: Frame) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(frame)
        return String(decoding: data, as: UTF8.self)
    }

    /// Encodes a client frame as `{"type": …, "id": …, "data": …}`, in that order (`data` with sorted keys): a server
    /// that refuses a frame too large to decode reads the id from its head and answers the request by it.
    public func encode(_ frame: ClientFrame) throws -> String {
        let head = #"{"type":\#(try encode(frame.type)),"id":\#(try encode(frame.requestID))"#
        guard let data = frame.data else { return head + "}" }
        return head + #","data":"# + (try encode(data)) + "}"
    }

    /// Encodes a server frame (the fast path: see ``ServerFrame/jsonText``).
    public func encode(_ frame: ServerFrame) -> String { frame.jsonText }

    /// Decodes a client frame; on failure, says why with a stable code and the request id when it could be read. The
    /// requests a server reads most by hand (``ClientFrameScanner``), every other one, any the scanner does not read
    /// and every rejection with `JSONDecoder`.
    public func decodeClientFrame(_ text: some StringProtocol) -> Result<ClientFrame, FrameRejection> {
        if let frame = ClientFrameScanner.frame(text) { return .success(frame) }
        return decodeClientFrameWithJSONDecoder(text)
    }

    /// Decodes a client frame with `JSONDecoder` alone (what ``decodeClientFrame(_:)`` falls back to).
    func decodeClientFrameWithJSONDecoder(_ text: some StringProtocol) -> Result<ClientFrame, FrameRejection> {
        let data = Data(text.utf8)
        do {
            return .success(try JSONDecoder().decode(ClientFrame.self, from: data))
        } catch {
            return .failure(FrameRejection(data: data, error: error))
        }
    }

    /// Decodes a server frame: the frames that carry messages by hand (``ServerFrameScanner``), every other one, and
    /// any the scanner does not read, with `JSONDecoder`.
    public func decodeServerFrame(_ text: some StringProtocol) throws -> ServerFrame {
        if let frame = ServerFrameScanner.frame(text) { return frame }
        return try decodeServerFrameWithJSONDecoder(text)
    }

    /// Decodes a server frame with `JSONDecoder` alone (what ``decodeServerFrame(_:)`` falls back to).
    func decodeServerFrameWithJSONDecoder(_ text: some StringProtocol) throws -> ServerFrame {
        try JSONDecoder().decode(ServerFrame.self, from: Data(text.utf8))
    }
}

/// A client frame the server could not accept: answered with an `error` frame, the connection stays open.
public struct FrameRejection: Error, Sendable {
    /// The request id, when the frame was a JSON object with a string `id` (whatever else is wrong with it).
    public let requestID: RequestID?
    /// The frame's `type`, when it was a JSON object with a string `type`.
    public let type: FrameType?
    public let error: WireError

    init(data: Data, error: any Error) {
        /// `id` and `type`, each read on its own: a wrong `type` must not hide a readable `id`.
        struct Head: Decodable {
            let id: RequestID?
            let type: FrameType?
            enum CodingKeys: String, CodingKey { case id, type }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                id = try? container.decode(RequestID.self, forKey: .id)
                type = try? container.decode(FrameType.self, forKey: .type)
            }
        }
        let head = try? JSONDecoder().decode(Head.self, from: data)
        self.requestID = head?.id
        self.type = head?.type
        switch error {
        case FrameDecodingError.unknownType(let type):
            self.error = WireError(code: .frameUnknownType, message: "Unknown frame type '\(type.prefix(64))'.")
        case DecodingError.keyNotFound(let key, let context):
            self.error = WireError(
                code: .frameInvalid,
                message: "Missing field '\(Self.path(context.codingPath + [key]))'."
            )
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            self.error = WireError(
                code: .frameInvalid,
                message: "Field '\(Self.path(context.codingPath))' has the wrong type."
            )
        default:
            self.error = WireError(code: .frameInvalid, message: "The frame is not a valid JSON object.")
        }
    }

    /// A coding path as dotted text (`data.messageIds.0`).
    public static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}
