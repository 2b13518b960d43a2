// Courier — Apache-2.0

/// `typing`: the caller is typing in a conversation (`active`, the default), or stopped (`active: false`). Nothing is
/// stored: the other members' devices connected now get a `typing` event, and a device that connects later learns
/// nothing of it (ADR 0050). NIM's custom system notification, Agora's CMD message (the typing guide's
/// `TypingBegin`/`TypingEnd`), RongCloud `sendTypingStatus:targetId:contentType:`.
///
/// A device says it again while its user keeps typing (every few seconds, before ``TypingEvent/expiresInMs`` runs out)
/// and says `active: false` when the user stops or sends.
public struct TypingRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    /// `false`: stopped typing. Absent means `true`.
    public let active: Bool?

    public init(conversation: ConversationID, active: Bool? = nil) {
        self.conversation = conversation
        self.active = active
    }
}

/// The `typing` ack.
public struct TypingAck: Hashable, Sendable, Codable {
    /// Whether the other members were told: `false` when the caller's ``TypingSettings/sendTypingIndicators`` is off
    /// or the server shows no typing (``TypingSettings/serverShowsTyping``). A device may stop sending then.
    public let shown: Bool
    /// How long the indicator lasts on the other devices unless said again.
    public let expiresInMs: Int

    public init(shown: Bool, expiresInMs: Int) {
        self.shown = shown
        self.expiresInMs = expiresInMs
    }
}

/// The `typing` event, to the other members' connected devices: `account` is typing in `conversation` (or stopped).
/// Show it for `expiresInMs` from its arrival unless another `typing` event of the same account renews or ends it; a
/// message of that account in the conversation ends it too.
public struct TypingEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let account: AccountID
    public let active: Bool
    public let expiresInMs: Int

    public init(conversation: ConversationID, account: AccountID, active: Bool, expiresInMs: Int) {
        self.conversation = conversation
        self.account = account
        self.active = active
        self.expiresInMs = expiresInMs
    }

    /// How long an indicator lasts unless said again: six seconds, so that a device that says it again every three
    /// seconds may lose one without the indicator flickering.
    public static let expiresInMs = 6000
}

/// `typingSettings`: reads, and optionally changes, whether the caller's typing is shown to others (account-wide, on
/// every device). Stream's `privacy_settings.typing_indicators`.
public struct TypingSettingsRequest: Hashable, Sendable, Codable {
    /// The new setting; omitted to only read it.
    public let sendTypingIndicators: Bool?
    public init(sendTypingIndicators: Bool? = nil) { self.sendTypingIndicators = sendTypingIndicators }
}

/// The `typingSettings` ack: the caller's setting after the request, and the server's.
public struct TypingSettings: Hashable, Sendable, Codable {
    /// Whether the account's typing is shown to others (default `true`).
    public let sendTypingIndicators: Bool
    /// Whether the server shows anyone's typing (`--typing-indicators`); when `false`, no `typing` is shown.
    public let serverShowsTyping: Bool

    public init(sendTypingIndicators: Bool, serverShowsTyping: Bool) {
        self.sendTypingIndicators = sendTypingIndicators
        self.serverShowsTyping = serverShowsTyping
    }
}
