// Courier — Apache-2.0
public import Foundation
internal import CourierWire

/// What a message holds: text, an attachment by reference, or a message type your app defines.
///
/// On the wire a message carries a `type` the server can see (for push text and webhooks) and a body it never
/// reads: the text itself, or JSON. An attachment with a `file:` URL is uploaded by the outbox before the message
/// goes out — to the Courier server by default, or through your ``AttachmentUploader`` — and the message carries
/// where it went; an `https:` URL is sent as it is.
///
/// NIM `NIMMessageType` with `NIMImageObject`, `NIMFileObject`, `NIMCustomObject`; Agora `AgoraChatMessageBodyType`
/// with `AgoraChatImageMessageBody`, `AgoraChatCustomMessageBody`; RongCloud `RCTextMessage`, `RCImageMessage`,
/// `RCFileMessage` and custom `RCMessageContent` subclasses.
public enum MessageContent: Sendable, Hashable {
    case text(String)
    case image(Attachment)
    case file(Attachment)
    case audio(Attachment)
    case video(Attachment)
    /// A message type your app defines (a location, a card, a poll …): a type name other than the ones above,
    /// 1–64 characters of `[A-Za-z0-9._:-]` starting with a letter, and a JSON text.
    case custom(type: String, json: String)

    /// The wire's `type`: `nil` for text.
    public var type: String? {
        switch self {
        case .text: nil
        case .image: "image"
        case .file: "file"
        case .audio: "audio"
        case .video: "video"
        case .custom(let type, _): type
        }
    }

    /// The attachment of an image, file, audio or video message.
    var attachment: Attachment? {
        switch self {
        case .image(let attachment), .file(let attachment), .audio(let attachment), .video(let attachment): attachment
        case .text, .custom: nil
        }
    }

    /// The same kind of message with another attachment (one that was uploaded); itself when it has none.
    func replacing(_ attachment: Attachment) -> MessageContent {
        switch self {
        case .image: .image(attachment)
        case .file: .file(attachment)
        case .audio: .audio(attachment)
        case .video: .video(attachment)
        case .text, .custom: self
        }
    }

    /// The wire's body: the text, or JSON.
    func body() throws(CourierError) -> String {
        switch self {
        case .text(let text): return text
        case .custom(_, let json): return json
        case .image(let attachment), .file(let attachment), .audio(let attachment), .video(let attachment):
            do {
                return String(decoding: try Self.encoder.encode(attachment), as: UTF8.self)
            } catch {
                throw .invalidInput(code: .invalidArgument, message: "The attachment cannot be encoded: \(error).")
            }
        }
    }

    /// The content of a stored message: its type and body as they came from the server. A body that does not decode
    /// as its type's attachment (another client wrote it) is kept as `.custom` so that nothing is lost.
    init(type: String?, body: String) {
        guard let type else {
            self = .text(body)
            return
        }
        let attachment = try? JSONDecoder().decode(Attachment.self, from: Data(body.utf8))
        switch (type, attachment) {
        case ("image", let attachment?): self = .image(attachment)
        case ("file", let attachment?): self = .file(attachment)
        case ("audio", let attachment?): self = .audio(attachment)
        case ("video", let attachment?): self = .video(attachment)
        default: self = .custom(type: type, json: body)
        }
    }

    /// Whether `.custom` names a type of its own (not `text` or an attachment's) in the allowed characters.
    var isValid: Bool {
        guard case .custom(let type, _) = self else { return true }
        return WireMessage.isValidType(type) && !["text", "image", "file", "audio", "video"].contains(type)
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
}

/// A file by reference: where it is (a `file:` URL the outbox uploads, or where it was uploaded) and what it is.
public struct Attachment: Sendable, Hashable, Codable {
    /// Where the file is: a `file:` URL on the device (uploaded before sending), or its address.
    public var url: URL
    /// Its MIME type, e.g. `image/jpeg`.
    public var mimeType: String
    /// Its size in bytes.
    public var size: Int?
    /// Its file name, as shown to users.
    public var name: String?
    /// Images and videos: width and height in pixels.
    public var width: Int?
    public var height: Int?
    /// Audio and video: length in seconds.
    public var duration: Double?
    /// Images and videos: a small preview's address.
    public var thumbnailURL: URL?

    public init(
        url: URL,
        mimeType: String,
        size: Int? = nil,
        name: String? = nil,
        width: Int? = nil,
        height: Int? = nil,
        duration: Double? = nil,
        thumbnailURL: URL? = nil
    ) {
        self.url = url
        self.mimeType = mimeType
        self.size = size
        self.name = name
        self.width = width
        self.height = height
        self.duration = duration
        self.thumbnailURL = thumbnailURL
    }
}
