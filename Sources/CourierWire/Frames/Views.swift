// Courier — Apache-2.0

/// An account's own view of a conversation (ADR 0029): what it cleared and deleted for itself, whether it muted or
/// pinned it. Kept by the server and synced to the account's devices, new installs included; nobody else sees it.
///
/// Entries it hides still travel in `sync` and `history` (a device's log stays gapless): a device hides those at or
/// below `cleared` and those in `deletedSeqs`, and they no longer count as unread.
public struct ConversationView: Hashable, Sendable, Codable {
    /// Every entry up to this seq is cleared for the account (0: none). Only moves forward.
    public let cleared: Seq
    /// Entries above `cleared` deleted for the account, ascending.
    public let deletedSeqs: [Seq]
    /// Muted: the app's push recipe is told so (each `message.undelivered` recipient has `muted`).
    public let muted: Bool
    /// When the account pinned the conversation; `nil` when it is not pinned. Lists put pinned conversations first,
    /// the most recently pinned on top.
    public let pinnedAt: Timestamp?
    /// Hidden from the conversation list while its newest seq is at most this; `nil` when not hidden. A newer entry
    /// shows it again by itself (NIM `deleteRecentSession:`, Agora `deleteConversation:`, RongCloud
    /// `removeConversation:targetId:`).
    public let hiddenUpTo: Seq?

    public init(
        cleared: Seq = .zero,
        deletedSeqs: [Seq] = [],
        muted: Bool = false,
        pinnedAt: Timestamp? = nil,
        hiddenUpTo: Seq? = nil
    ) {
        self.cleared = cleared
        self.deletedSeqs = deletedSeqs
        self.muted = muted
        self.pinnedAt = pinnedAt
        self.hiddenUpTo = hiddenUpTo
    }

    /// Nothing cleared, deleted, muted or pinned.
    public static let none = ConversationView()
}

/// `changeView`: change the caller's own view of a conversation. Every field but `conversation` is optional; the
/// ones present (at least one) are applied together, in one transaction.
public struct ChangeViewRequest: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    /// Delete these messages for the caller's account (NIM `deleteMessageFromServer`, Agora
    /// `removeMessagesFromServerWithMessageIds`, RongCloud `deleteRemoteMessage`). At most 100.
    public let deleteMessageIds: [MessageID]?
    /// Clear the conversation for the caller's account: every entry up to the newest one now.
    public let clear: Bool?
    public let muted: Bool?
    public let pinned: Bool?
    /// Hide the conversation from the list up to its newest entry now (`true`), until a newer one arrives; or show it
    /// again (`false`).
    public let hidden: Bool?

    public init(
        conversation: ConversationID,
        deleteMessageIds: [MessageID]? = nil,
        clear: Bool? = nil,
        muted: Bool? = nil,
        pinned: Bool? = nil,
        hidden: Bool? = nil
    ) {
        self.conversation = conversation
        self.deleteMessageIds = deleteMessageIds
        self.clear = clear
        self.muted = muted
        self.pinned = pinned
        self.hidden = hidden
    }

    /// The most message ids one request deletes.
    public static let maxDeletedMessages = 100
}

/// The `changeView` ack and the `view` event (to the account's other devices): the caller's view now.
public struct ViewEvent: Hashable, Sendable, Codable {
    public let conversation: ConversationID
    public let view: ConversationView
    public init(conversation: ConversationID, view: ConversationView) {
        self.conversation = conversation
        self.view = view
    }
}
