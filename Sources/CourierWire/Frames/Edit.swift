// Courier — Apache-2.0

/// `edit`: replace a message's body and `ext` (Agora `modifyMessage`, NIM's server-side message update, Stream
/// `updateMessage`). The edit is an entry of the conversation's log, as a recall is (ADR 0054): every member's devices
/// get it live or through `sync`, and the message's row holds its latest version (``WireMessage/editedAt``).
///
/// The message's sender edits within the server's edit window; in a group the owner and admins may edit their
/// members' messages when the server allows it. A recalled message cannot be edited, nor can a notice. Idempotent on
/// `(caller, clientId)`: a repeat answers the same entry as a duplicate.
public struct EditRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// The caller's idempotency key for this edit (each edit of one message needs its own).
    public let clientID: ClientMessageID
    /// The new body (at most `maxBodyBytes` UTF-8 bytes; not empty).
    public let body: String
    /// The new key-values; absent keeps none (an edit replaces `ext` as a whole, as it replaces the body).
    public let ext: [String: String]?

    public init(
        conversation: ConversationID,
        messageID: MessageID,
        clientID: ClientMessageID,
        body: String,
        ext: [String: String]? = nil
    ) {
        self.conversation = conversation
        self.messageID = messageID
        self.clientID = clientID
        self.body = body
        self.ext = ext
    }

    enum CodingKeys: String, CodingKey {
        case conversation
        case messageID = "messageId"
        case clientID = "clientId"
        case body, ext
    }
}

/// What an edit entry of a conversation's log says: which message it edits. The entry's own `body` and `ext` are the
/// new ones, and its `time` is the message's new ``WireMessage/editedAt``.
public struct WireEditNotice: Hashable, Sendable, Codable {
    /// The edited message.
    public let messageID: MessageID
    /// Who sent the edited message.
    public let sender: AccountID
    /// Who edited it: its sender, or a group's owner or admin.
    public let editedBy: AccountID
    /// `true` when the app's backend edited it (REST); `editedBy` is then the message's sender. Absent otherwise.
    public let byApp: Bool?

    public init(messageID: MessageID, sender: AccountID, editedBy: AccountID, byApp: Bool? = nil) {
        self.messageID = messageID
        self.sender = sender
        self.editedBy = editedBy
        self.byApp = byApp
    }

    enum CodingKeys: String, CodingKey {
        case messageID = "messageId"
        case sender, editedBy, byApp
    }
}
