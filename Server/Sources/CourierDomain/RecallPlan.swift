// Courier — Apache-2.0
public import CourierWire

/// Whether a recall may happen and what it removes (SPEC §6), decided once for every backend from facts the backend
/// read in the recall's own transaction (``Facts``): the recalled message's state and, in a group, the roles of the
/// requester and of the message's sender. Nothing a recall depends on is read before its transaction.
public struct RecallPlan: Sendable, Hashable {
    public enum Write: Sendable, Hashable {
        /// A one-way recall: the sender's account keeps the message as sent (its body and quote), readable by it alone.
        case keepSenderCopy(MessageID)
        /// The body and quote go, and the message stops counting as unread; the tombstone (ids, sender, seq, time)
        /// stays so that every device learns of the recall.
        case erase(MessageID)
        /// Every earlier version goes too: the bodies and `ext` of its edit entries (which stay, as tombstones, so that
        /// the log keeps its seqs) and their `message.edited` events.
        case eraseEdits(MessageID)
        /// Replies stop quoting it.
        case unquoteReplies(MessageID)
        /// The files it refers to (``MediaReference``) that its sender (or the app) uploaded are erased, in a two-way
        /// recall only: a one-way recall's sender keeps a copy that refers to them. Someone else's file named in a
        /// message stays: recalling that message must not erase it.
        case eraseMedia(MessageID, [String])
        /// Its receipts go: the count, so that later reads neither raise it nor announce it, and the notes left with
        /// acks. Readers' positions stay: they are positions in the log, where the tombstone is.
        case dropReceipts(Seq)
        /// Its reactions go (ADR 0055).
        case dropReactions(MessageID)
    }

    /// The recalled message as the recall's transaction found it.
    public struct Target: Sendable, Hashable {
        public let recalled: Bool
        public let seq: Seq
        /// When it was sent.
        public let time: Timestamp
        /// The files its body and `ext` refer to (``MediaReference``).
        public let media: [String]
        public init(recalled: Bool, seq: Seq, time: Timestamp, media: [String] = []) {
            self.recalled = recalled
            self.seq = seq
            self.time = time
            self.media = media
        }
    }

    /// Who recalls, and within which windows (the server's configuration, in milliseconds; `nil`: no window).
    public struct Rules: Sendable, Hashable {
        /// The app's backend (REST): any message, as its sender, whatever the roles.
        public let byApp: Bool
        /// How long after sending its sender (or the app) may recall a message.
        public let window: Int64?
        /// How long after sending a group's owner or admin may recall someone else's message.
        public let managerWindow: Int64?
        public init(byApp: Bool, window: Int64?, managerWindow: Int64?) {
            self.byApp = byApp
            self.window = window
            self.managerWindow = managerWindow
        }
    }

    public let writes: [Write]

    /// - Parameters:
    ///   - entry: The recall notice's entry being appended (`entry.recall` set; `entry.time` is now).
    ///   - target: The recalled message's state, `nil` when there is no such message.
    ///   - roles: In a group, the requester's and the sender's roles (`nil` for an account that is not a member);
    ///     `nil` in a direct conversation.
    /// - Throws: ``StorageError/conversationNotFound(_:)`` for no message; ``StorageError/groupRefused(_:)`` with
    ///   ``GroupRefusal/actorNotAMember`` when the requester is not in the group; ``StorageError/recallRefused(_:)``
    ///   for a requester who may not recall it or a window that has passed; ``StorageError/alreadyRecalled`` when
    ///   another requester recalled it (a repeat by the same requester is answered earlier, as a duplicate of its
    ///   notice).
    public init(
        _ entry: MessageDraft,
        target: Target?,
        roles: (requester: MemberRole?, sender: MemberRole?)?,
        rules: Rules
    ) throws(StorageError) {
        guard let notice = entry.recall else { throw .conversationNotFound(entry.conversation) }
        guard let target else { throw .conversationNotFound(entry.conversation) }
        let bySender = notice.recalledBy == notice.sender
        if !rules.byApp {
            if let roles {
                guard let requester = roles.requester else { throw .groupRefused(.actorNotAMember) }
                // The owner recalls anyone's message, admins ordinary members'; a sender who left counts as a member.
                guard bySender || GroupRules.canManage(requester, roles.sender ?? .member) else {
                    throw .recallRefused(.notManager)
                }
            } else {
                guard bySender else { throw .recallRefused(.notSender) }
            }
        }
        guard !target.recalled else { throw .alreadyRecalled }
        let window = bySender ? rules.window : rules.managerWindow
        if let window, entry.time.rawValue - target.time.rawValue > window {
            throw .recallRefused(.windowExpired(milliseconds: window))
        }
        let id = notice.messageID
        writes = (notice.mode == .oneWay ? [.keepSenderCopy(id)] : [])
            + [.erase(id), .eraseEdits(id), .unquoteReplies(id), .dropReceipts(target.seq), .dropReactions(id)]
            + (notice.mode == .oneWay || target.media.isEmpty ? [] : [.eraseMedia(id, target.media)])
    }
}

/// Why a recall was refused (SPEC §6: each a distinct error).
public enum RecallRefusal: Error, Hashable, Sendable {
    /// In a direct conversation only the sender recalls.
    case notSender
    /// In a group the requester is neither the sender nor an owner or admin above the sender.
    case notManager
    /// The window has passed.
    case windowExpired(milliseconds: Int64)
}
