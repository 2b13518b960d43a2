// Courier — Apache-2.0
public import Foundation
public import CourierWire

/// A message stored on this device: sent by this account (from any of its devices) or received.
public struct Message: Sendable, Hashable, Identifiable {
    /// Server-assigned, globally unique.
    public let id: MessageID
    public let conversation: ConversationID
    /// Position in the conversation: 1, 2, 3 … without gaps.
    public let seq: Seq
    /// The sender's idempotency key.
    public let clientID: ClientMessageID
    public let sender: AccountID
    /// Whether this account sent it, from this or another of its devices.
    public let isOwn: Bool
    /// Server time of the commit.
    public let time: Timestamp
    /// The wire's `type`: `nil` for text, `image`, `file`, `audio`, `video`, or your app's own (see ``content``).
    public let type: String?
    /// The text, or the JSON of an attachment or app-defined message; empty once the message was recalled (status
    /// ``MessageStatus/recalled``), or the tip's text for a ``Kind/recallTip``.
    public let body: String
    /// Derived from what the device knows now (see ``MessageStatus``).
    public let status: MessageStatus
    /// A chat message, or a local tip the app put in place of a recalled message
    /// (``CourierClient/insertRecallTip(for:text:)``).
    public let kind: Kind
    /// The message this one replies to.
    public let replyTo: MessageID?
    /// The start of the replied-to message, as the server quoted it; `nil` once that message was recalled.
    public let quote: String?
    /// Read state, as Agora names it. For a message you received: you have read it, on this or another of your
    /// devices, so the SDK never acks it again — also after a private read or while you do not share reads, when the
    /// sender was never told (Agora `isReadAcked` and NIM `isTeamReceiptSended` mean an ack was sent; here "needs an
    /// ack" is simply "not read yet"; RongCloud `ReceivedStatus_READ`). For your own message: the recipient has read
    /// it (NIM `isRemoteRead`, RongCloud `SentStatus_READ`), the same as `status == .read`.
    public let isReadAcked: Bool
    /// Groups: the sender asks for read receipts of this message (NIM `teamReceiptEnabled`, Agora `isNeedGroupAck`).
    /// Acknowledge it with ``CourierClient/markRead(_:in:privately:)-(MessageID,_,_)`` (or with `content:`); ``isReadAcked`` tells whether you did.
    public let needsReadReceipt: Bool
    /// Set when ``kind`` is ``Kind/groupChange``: who joined, left, was removed, or changed role.
    public let groupChange: GroupChange?
    /// Your group messages that asked for receipts: the counts last heard from the server (events and queries),
    /// `nil` until then (NIM `teamReceiptInfo`).
    public let readReceiptCount: ReceiptCount?
    /// Key-values the sender attached (``CourierClient/send(_:to:replyTo:needsReadReceipt:ext:clientID:)-(MessageContent,_,_,_,_,_)``;
    /// NIM `remoteExt`, Agora `ext`, RongCloud `expansionDic`); `nil` when none, and once recalled.
    public var ext: [String: String]? = nil
    /// The sender's profile as this device last heard of it (ADR 0053): the name and avatar to show beside the
    /// message; `nil` until known. NIM `NIMMessage.senderName`, Agora `AgoraChatUserInfo` of `from`.
    public var senderProfile: AccountProfile? = nil
    /// When the message was last edited (ADR 0054; Agora `AgoraChatMessage.body` after `onMessageContentChanged`,
    /// Stream `message.messageTextUpdatedAt`); `nil` when never. ``body`` and ``ext`` are then the latest edit's: show
    /// "edited" beside it.
    public var editedAt: Timestamp? = nil
    /// The message's reactions as this device last heard (ADR 0055): a count per reaction, in reaction order (Agora
    /// `AgoraChatMessage.reactionList`, Stream `reactionCounts`). Refreshed live, and for the messages you show by
    /// ``CourierClient/fetchReactions(for:in:)``.
    public var reactions: [ReactionCount] = []
    /// Your own reactions on it (Agora `AgoraChatMessageReaction.isAddedBySelf`).
    public var myReactions: [String] = []

    /// The server time as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(time.rawValue) / 1000) }

    /// What the message holds, decoded from ``type`` and ``body``.
    public var content: MessageContent { MessageContent(type: type, body: body) }

    /// What a listed message is.
    public enum Kind: String, Sendable, Hashable {
        case message
        /// A local tip in place of a recalled message ("You recalled a message"); `body` is the tip's text.
        case recallTip
        /// A group membership change (``Message/groupChange``); `sender` made it.
        case groupChange
    }
}

/// A member added or removed a reaction on a message you hold (ADR 0055; Agora `onReactionChanged`, Stream
/// `reaction.new`/`reaction.deleted`): the message's counts after it.
public struct ReactionUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// Who reacted.
    public let account: AccountID
    public let reaction: String
    /// `false`: removed.
    public let added: Bool
    /// The message's counts after it, in reaction order.
    public let counts: [ReactionCount]
    /// Your own reactions on the message after it.
    public let myReactions: [String]
}

/// A message was recalled (NIM `onRecvRevokeMessageNotification:` / `NIMRevokeMessageNotification`, Agora
/// `messagesInfoDidRecall:`, RongCloud `messageDidRecall:`). The local copy loses its body and stays in place with status
/// ``MessageStatus/recalled`` (one-way recalls: the sender keeps it as it was and gets no notice).
public struct RecallNotice: Sendable, Hashable {
    /// How the notice reached this device.
    public enum Arrival: String, Sendable, Hashable {
        /// Live, while connected.
        case online
        /// Caught up after a reconnect (the recall happened while this device was offline).
        case offline
        /// Found while paging history from the server (NIM `NIMRevokeMessageNotification` roaming): e.g. a new install,
        /// which syncs only recent and unread entries (``CourierClient/Configuration/initialSyncLimit``),
        /// paging back over an older recall.
        case roaming
    }
    public let conversation: ConversationID
    /// The recalled message.
    public let messageID: MessageID
    /// Who sent it.
    public let sender: AccountID
    /// Who recalled it (NIM `operator`).
    public let recalledBy: AccountID
    public let mode: RecallMode
    /// When it was recalled (server time).
    public let time: Timestamp
    /// The note given with the recall (NIM 附言).
    public let postscript: String?
    /// Key-values the recall carried (``CourierClient/recall(_:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``),
    /// of the same type as a message's ``Message/ext``; `nil` when none. A recall made by your backend with JSON
    /// values other than strings shows each such value as its JSON text.
    public let ext: [String: String]?
    /// Text to replace an already shown push notification.
    public let pushText: String?
    public let pushPayload: String?
    /// Whether the notice itself counts as unread (NIM `shouldBeCounted`).
    public let countsAsUnread: Bool
    /// Whether the app's backend recalled it (moderation through the REST API; `recalledBy` is then the sender).
    public let byApp: Bool
    public let arrival: Arrival

    init(_ notice: WireRecallNotice, conversation: ConversationID, time: Timestamp, arrival: Arrival) {
        self.conversation = conversation
        self.messageID = notice.messageID
        self.sender = notice.sender
        self.recalledBy = notice.recalledBy
        self.mode = notice.mode
        self.time = time
        self.postscript = notice.postscript
        self.ext = notice.ext.flatMap(Self.ext(json:))
        self.pushText = notice.pushText
        self.pushPayload = notice.pushPayload
        self.countsAsUnread = notice.countsAsUnread
        self.byApp = notice.byApp ?? false
        self.arrival = arrival
    }

    /// A recall's `ext` as the wire carries it (JSON text) in the SDK's type: a JSON object's string values as they
    /// are, other values as their JSON text; `nil` for anything else.
    static func ext(json: String) -> [String: String]? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return nil }
        var ext: [String: String] = [:]
        for (key, value) in object {
            if let text = value as? String {
                ext[key] = text
            } else if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]) {
                ext[key] = String(decoding: data, as: UTF8.self)
            }
        }
        return ext
    }
}

/// Where a message stands, derived from facts (outbox state, the peers' delivery and read watermarks); never stored.
///
/// NIM: `deliveryState` (accepted by NIM's server: `.sending`, `.sent`, `.failed`) + `isRemoteRead`; RongCloud:
/// `SentStatus`; Agora: `isDeliverAcked` / `isReadAcked`.
public enum MessageStatus: String, Sendable, Hashable, CaseIterable {
    /// Queued in the outbox; the server has not acknowledged it yet.
    case sending
    /// The server refused it, or its attachment could not be uploaded; see ``PendingMessage/failure``.
    case failed
    /// Stored on the server (has an id and a seq).
    case sent
    /// Stored on a device of the recipient. Messages this device received are `delivered` too.
    case delivered
    /// Your message: the recipient has read it. A message you received: you have read it.
    case read
    /// Recalled (by its sender, a group owner or admin, or the app): the body is gone, and the message stays in
    /// place so that the chat can show "message recalled" there (RongCloud's recall notification in place; NIM and
    /// Agora remove it — and ``CourierClient/insertRecallTip(for:text:)`` turns it into a tip with your text).
    case recalled

    /// Whether it reached a device of the recipient: `delivered` or `read` (a read message was delivered first).
    /// Agora `isDeliverAcked`; NIM has no such state (its `deliveryState` is the server's acceptance: `.sent`).
    /// Compare with this rather than `== .delivered`, which a read message is not.
    public var isDelivered: Bool { self == .delivered || self == .read }

    /// Whether it was read: your message by the recipient, a received one by you (Agora `isReadAcked`, NIM
    /// `isRemoteRead`).
    public var isRead: Bool { self == .read }

    /// The status of an acknowledged message.
    ///
    /// - Parameters:
    ///   - seq: The message's seq.
    ///   - isOwn: Whether this account sent it.
    ///   - peerDelivered: The highest delivery watermark among the other members.
    ///   - isRead: Your message: a peer has read it (its read watermark or a message read ack). A received
    ///     message: you have read it.
    ///   - isRecalled: The message was recalled (what else was true of it no longer matters).
    public static func derive(
        seq: Seq,
        isOwn: Bool,
        peerDelivered: Seq,
        isRead: Bool,
        isRecalled: Bool = false
    ) -> MessageStatus {
        if isRecalled { return .recalled }
        if isRead { return .read }
        guard isOwn else { return .delivered }
        if peerDelivered >= seq { return .delivered }
        return .sent
    }
}

/// A message in the outbox: written on this device, not yet acknowledged by the server.
public struct PendingMessage: Sendable, Hashable, Identifiable {
    public var id: ClientMessageID { clientID }
    public let clientID: ClientMessageID
    public let conversation: ConversationID
    /// The wire's `type` (`nil` for text); see ``content``.
    public let type: String?
    public let body: String
    /// When it was queued (device clock).
    public let createdAt: Date
    /// `.sending` or `.failed`.
    public let status: MessageStatus
    /// Why it failed, when `status == .failed`: the server's refusal, or the upload's failure.
    public let failure: CourierError?

    /// What the message holds, decoded from ``type`` and ``body``.
    public var content: MessageContent { MessageContent(type: type, body: body) }
}

/// A conversation as this device knows it.
public struct Conversation: Sendable, Hashable, Identifiable {
    public let id: ConversationID
    public let kind: ConversationKind
    public let members: [AccountID]
    /// The newest message stored locally.
    public let lastMessage: Message?
    /// The seq of the newest message on the server, as of the last sync.
    public let lastSeq: Seq
    /// Messages of others you have not read (NIM `unreadCount`, Agora `unreadMessagesCount`). Messages you cleared or
    /// deleted for yourself do not count.
    public let unreadCount: Int
    /// You muted it (``CourierClient/setMuted(_:in:)``), on any of your devices: your app's push recipe sees it in
    /// `message.undelivered` (RongCloud `getConversationNotificationStatus:targetId:success:error:`, Agora `getSilentModeForConversation:conversationType:completion:`).
    public var isMuted: Bool = false
    /// When you pinned it (``CourierClient/setPinned(_:in:)``); `nil` when it is not pinned. Pinned conversations
    /// come first in ``CourierClient/conversations()``, the most recently pinned on top (RongCloud `isTop`, Agora
    /// `isPinned`).
    public var pinnedAt: Timestamp?
    /// The text you were typing, kept on this device (``CourierClient/setDraft(_:in:)``; RongCloud `draft`).
    public var draft: String?
    /// A group's name, avatar, announcement and `ext`, as its owner and admins last set them
    /// (``CourierClient/setGroupProfile(_:in:)``); `nil` for a direct conversation or a group without one.
    /// NIM `NIMTeam.teamName`/`avatarUrl`/`announcement`, Agora `AgoraChatGroup.groupName`/`announcement`, RongCloud
    /// `RCGroup.groupName`/`portraitUri`.
    public var groupProfile: GroupProfile?
    /// In a direct conversation, the other member's profile as this device last heard of it (ADR 0053): its display
    /// name and avatar for the conversation list. `nil` in a group, or before it is known.
    public var peerProfile: AccountProfile?

    /// Whether it is pinned.
    public var isPinned: Bool { pinnedAt != nil }
}

/// Some of your messages reached a device of `account` (Agora `messagesDidDeliver`).
public struct DeliveryUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    /// Who received them.
    public let account: AccountID
    /// Everything up to this seq is stored on one of their devices.
    public let watermark: Watermark
    /// Your messages that became delivered with this update, in seq order.
    public let messageIDs: [MessageID]
}

/// A peer read some of your messages (Agora `messagesDidRead`, NIM `onRecvMessageReceipts`, RongCloud
/// `RCLibDispatchReadReceiptNotification` in direct chats; its groups' `onMessageReceiptResponse` is
/// ``GroupReadReceiptUpdate``).
public struct ReadUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    /// Who read them.
    public let account: AccountID
    /// Everything up to this seq is read by `account`.
    public let watermark: Watermark
    /// Your messages that became read with this update, in seq order.
    public let messageIDs: [MessageID]
}

/// You read a conversation on another of your devices (Agora `onConversationRead` on multi-device): its unread
/// count is zero there and here, up to `watermark`.
public struct ConversationReadUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    /// Everything up to this seq is read.
    public let watermark: Watermark
    /// The unread count after it (0 unless newer messages arrived since).
    public let unreadCount: Int
}

/// Members read some of your group messages that asked for read receipts (RongCloud `onMessageReceiptResponse`,
/// Agora `groupMessageDidRead:`, NIM `onRecvMessageReceipts:`).
public struct GroupReadReceiptUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// The readers new since the previous update: `{account: readTime}`. Not all of them (RongCloud's `readerList`
    /// is): merge them into what you show, or read ``CourierClient/localReaders(of:)``, which holds every reader
    /// this device heard of. ``readCount`` and ``unreadCount`` are the totals.
    public let readers: [AccountID: Timestamp]
    /// The short notes the readers sent with their acks (Agora), if any.
    public let contents: [AccountID: String]
    public let readCount: Int
    public let unreadCount: Int
}

/// The sender of a group message asked for read receipts after sending it (RongCloud `onMessageReceiptRequest`).
/// The message now has ``Message/needsReadReceipt``; acknowledge it when the user sees it.
public struct ReadReceiptRequest: Sendable, Hashable {
    public let conversation: ConversationID
    public let messageID: MessageID
    /// Who asked (the message's sender).
    public let requester: AccountID
}

/// A conversation's unread count changed (NIM `didUpdateRecentSession` with `unreadCount`, Agora
/// `conversationListDidUpdate:`).
public struct UnreadCountUpdate: Sendable, Hashable {
    public let conversation: ConversationID
    public let unreadCount: Int
    /// Across every conversation (NIM `allUnreadCount`).
    public let totalUnreadCount: Int
}

/// The connection to the server.
public enum ConnectionState: Sendable, Hashable {
    /// Not connected and not trying: before `connect`, after `disconnect`, or after the server refused the token.
    case disconnected(CourierError?)
    /// Opening the connection, authenticating or catching up.
    case connecting
    /// Connected and caught up; events arrive live.
    case connected
    /// The connection dropped; the next attempt is scheduled.
    case waitingToReconnect
}

/// A change of a group's membership or profile, as an entry of its log (a message of kind
/// ``Message/Kind/groupChange``; its ``Message/sender`` made it). NIM's team notifications (`NIMTeamNotificationContent`),
/// Agora's group events, RongCloud's group notification messages.
public struct GroupChange: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable {
        /// The group was created with ``GroupChange/accounts`` as members (the sender is the owner).
        case created
        /// ``GroupChange/accounts`` joined.
        case added
        /// ``GroupChange/accounts`` were removed by the sender.
        case removed
        /// The sender left.
        case left
        /// ``GroupChange/accounts`` now have ``GroupChange/role``.
        case roleChanged
        /// `accounts[0]` is the new owner; the sender became an ordinary member.
        case ownerTransferred
        /// The owner dismissed the group: every member left at once; the group's last entry.
        case dismissed
        /// The group's profile changed (``GroupChange/profile``: the fields set).
        case profileChanged
    }

    public let action: Action
    public let accounts: [AccountID]
    /// For ``Action/roleChanged``: the new role.
    public let role: MemberRole?
    /// For ``Action/profileChanged``: the fields set (an empty text cleared its field); for ``Action/created``, the
    /// first profile.
    public let profile: GroupProfile?

    init(_ change: WireGroupChange) {
        action =
            switch change.action {
            case .created: .created
            case .added: .added
            case .removed: .removed
            case .left: .left
            case .roleChanged: .roleChanged
            case .ownerTransferred: .ownerTransferred
            case .dismissed: .dismissed
            case .profileChanged: .profileChanged
            }
        accounts = change.accounts
        role = change.role
        profile = change.profile
    }
}

/// One page of a group's members (``CourierClient/members(of:cursor:limit:)``).
public struct GroupMemberPage: Sendable, Hashable {
    /// In account order.
    public let members: [GroupMember]
    /// How many members the group has.
    public let total: Int
    /// Pass it for the next page; `nil` on the last.
    public let nextCursor: String?
}

/// One page of a group message's read, unread or delivered list
/// (``CourierClient/readReceiptList(for:in:list:accounts:cursor:limit:)``).
public struct ReadReceiptList: Sendable, Hashable {
    public let messageID: MessageID
    public let list: ReceiptListKind
    /// The members on this page, with when they read (or got) it and the content of their ack.
    public let entries: [ReceiptListEntry]
    /// The size of the whole list (among the accounts asked for, when filtered).
    public let total: Int
    /// Pass it for the next page; `nil` on the last.
    public let nextCursor: String?
    /// The message was recalled: its lists are empty.
    public let isRecalled: Bool
}
