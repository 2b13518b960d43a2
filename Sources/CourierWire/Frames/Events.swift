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

/// `syncRequired` event: the server may have missed changes it would have pushed (in a cluster, its change listener
/// reconnected). Run `sync` with your cursors; nothing is lost, as everything is in the conversation logs.
public struct SyncRequiredEvent: Hashable, Sendable, Codable {
    public init() {}
}
