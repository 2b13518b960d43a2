// Courier — Apache-2.0
public import CourierWire

/// Whether an edit may happen and what it rewrites (ADR 0054), decided once for every backend from facts the backend
/// read in the edit's own transaction (``Facts`` in CourierSQL): the edited message's state and, in a group, the roles
/// of the editor and of the message's sender. Nothing an edit depends on is read before its transaction.
public struct EditPlan: Sendable, Hashable {
    public enum Write: Sendable, Hashable {
        /// The message's row takes the edit's body and `ext`, and `edited_at` the edit's time.
        case rewrite(MessageID)
        /// Replies quote the new body (``ReplyQuote``).
        case requoteReplies(MessageID)
    }

    /// The edited message as the edit's transaction found it.
    public struct Target: Sendable, Hashable {
        public let recalled: Bool
        /// When it was sent.
        public let time: Timestamp
        public init(recalled: Bool, time: Timestamp) {
            self.recalled = recalled
            self.time = time
        }
    }

    /// Who edits, and within which window (the server's configuration, in milliseconds; `nil`: no window).
    public struct Rules: Sendable, Hashable {
        /// The app's backend (REST): any message, as its sender, whatever the roles.
        public let byApp: Bool
        /// How long after sending a message may be edited.
        public let window: Int64?
        /// Whether a group's owner and admins edit their members' messages (as they recall them).
        public let managersEdit: Bool
        public init(byApp: Bool, window: Int64?, managersEdit: Bool) {
            self.byApp = byApp
            self.window = window
            self.managersEdit = managersEdit
        }
    }

    public let writes: [Write]

    /// - Parameters:
    ///   - entry: The edit entry being appended (`entry.edit` set; `entry.time` is now).
    ///   - target: The edited message's state, `nil` when there is no such message.
    ///   - roles: In a group, the editor's and the sender's roles (`nil` for an account that is not a member); `nil`
    ///     in a direct conversation.
    /// - Throws: ``StorageError/conversationNotFound(_:)`` for no message; ``StorageError/groupRefused(_:)`` with
    ///   ``GroupRefusal/actorNotAMember`` when the editor is not in the group; ``StorageError/editRefused(_:)`` for an
    ///   editor who may not edit it, a window that has passed, or a recalled message.
    public init(
        _ entry: MessageDraft,
        target: Target?,
        roles: (editor: MemberRole?, sender: MemberRole?)?,
        rules: Rules
    ) throws(StorageError) {
        guard let notice = entry.edit, let target else { throw .conversationNotFound(entry.conversation) }
        let bySender = notice.editedBy == notice.sender
        if !rules.byApp {
            if let roles {
                guard let editor = roles.editor else { throw .groupRefused(.actorNotAMember) }
                // The sender edits while a member; the owner anyone's message, admins ordinary members', when allowed.
                guard bySender || (rules.managersEdit && GroupRules.canManage(editor, roles.sender ?? .member)) else {
                    throw .editRefused(.notManager)
                }
            } else {
                guard bySender else { throw .editRefused(.notSender) }
            }
        }
        guard !target.recalled else { throw .editRefused(.recalled) }
        if let window = rules.window, entry.time.rawValue - target.time.rawValue > window {
            throw .editRefused(.windowExpired(milliseconds: window))
        }
        writes = [.rewrite(notice.messageID), .requoteReplies(notice.messageID)]
    }
}

/// Why a reaction was refused (ADR 0055).
public enum ReactionRefusal: Error, Hashable, Sendable {
    /// The message was recalled: its reactions went with it.
    case messageRecalled
    /// The account has ``ReactRequest/maxPerAccount`` reactions on the message, or the message
    /// ``ReactRequest/maxPerMessage`` distinct ones.
    case tooMany
}

/// Why an edit was refused: each a distinct error.
public enum EditRefusal: Error, Hashable, Sendable {
    /// In a direct conversation only the sender edits.
    case notSender
    /// In a group the editor is not the sender, and not an owner or admin above the sender where managers edit.
    case notManager
    /// The window has passed.
    case windowExpired(milliseconds: Int64)
    /// The message was recalled.
    case recalled
}
