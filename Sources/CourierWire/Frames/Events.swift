// Courier — Apache-2.0

/// `message` event: a new message in a conversation of the account (from a peer, or from another device of the
/// same account).
public struct MessageEvent: Hashable, Sendable, Codable {
    public let message: WireMessage
    public init(message: WireMessage) { self.message = message }
}

/// `delivered` event: `account` has stored everything in `conversation` up to `watermark.seq` on a device.
/// Sent to the other members' devices.
public struct DeliveredEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let account: AccountID
    public let watermark: Watermark
    public init(conversation: ConversationID, account: AccountID, watermark: Watermark) {
        self.conversation = conversation
        self.account = account
        self.watermark = watermark
    }
}
