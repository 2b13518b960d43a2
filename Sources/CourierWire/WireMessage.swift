// Courier — Apache-2.0

/// An entry of a conversation's log as it travels on the wire: a chat message, or a notice — a recall (`recall`
/// set), an edit (`edit`), a group membership change (`group`), or a request for read receipts (`receiptRequest`). Every field is
/// assigned by the server except `clientId`, `type`, `body`, `ext`, `replyTo` and `needsReadReceipt`.
public struct WireMessage: Hashable, Sendable, Codable {
    /// Server-assigned, globally unique.
    public let id: MessageID
    public let conversation: ConversationID
    /// Position in the conversation: 1, 2, 3 … without gaps.
    public let seq: Seq
    /// The sender's idempotency key.
    public let clientID: ClientMessageID
    public let sender: AccountID
    /// Server time of the commit.
    public let time: Timestamp
    /// What the body holds, visible to the server (for push text and webhooks) while the body stays opaque: `nil` for
    /// text; `image`, `file`, `audio`, `video` for an attachment by reference (the body is its JSON, see the SDK's
    /// `Attachment`); any other name for an app-defined message (the body is its JSON). See ``isValidType(_:)``.
    public let type: String?
    /// Opaque to the server: text, or JSON the app defines. At most `maxBodyBytes` UTF-8 bytes. Empty once recalled,
    /// and for recall notices.
    public let body: String
    /// The message this one replies to.
    public let replyTo: MessageID?
    /// The start of the replied-to message's body, taken at send time; removed when that message is recalled.
    public let quote: String?
    /// Set on a recall notice: what was recalled, by whom, how.
    public let recall: WireRecallNotice?
    /// `true` on the tombstone of a recalled message (its body is gone).
    public let recalled: Bool?
    /// `true` when the sender asks the group for read receipts of this message (NIM `teamReceiptEnabled`, Agora
    /// `isNeedGroupAck`), when sent or afterwards.
    public let needsReadReceipt: Bool?
    /// Set on a group membership change.
    public let group: WireGroupChange?
    /// Set on the entry by which a message's sender asked for read receipts after sending it: that message's id.
    public let receiptRequest: MessageID?
    /// Key-values the sender attached, stored and sent with the message (NIM `remoteExt`, Agora `ext`, RongCloud
    /// `expansionDic`): string keys and string values, at most ``maxExtBytes`` in all (see ``isValidExt(_:)``). Set at
    /// send time; an edit replaces it, a two-way recall removes it with the body.
    public let ext: [String: String]?
    /// Set on an edit entry: the message it edits (its `body` and `ext` are the new ones).
    public let edit: WireEditNotice?
    /// When the message was last edited (the time of its latest edit entry); absent for a message never edited. Its
    /// `body` and `ext` are then the latest edit's.
    public let editedAt: Timestamp?

    public init(
        id: MessageID,
        conversation: ConversationID,
        seq: Seq,
        clientID: ClientMessageID,
        sender: AccountID,
        time: Timestamp,
        type: String? = nil,
        body: String,
        replyTo: MessageID? = nil,
        quote: String? = nil,
        recall: WireRecallNotice? = nil,
        recalled: Bool? = nil,
        needsReadReceipt: Bool? = nil,
        group: WireGroupChange? = nil,
        receiptRequest: MessageID? = nil,
        ext: [String: String]? = nil,
        edit: WireEditNotice? = nil,
        editedAt: Timestamp? = nil
    ) {
        self.id = id
        self.conversation = conversation
        self.seq = seq
        self.clientID = clientID
        self.sender = sender
        self.time = time
        self.type = type
        self.body = body
        self.replyTo = replyTo
        self.quote = quote
        self.recall = recall
        self.recalled = recalled
        self.needsReadReceipt = needsReadReceipt
        self.group = group
        self.receiptRequest = receiptRequest
        self.ext = ext
        self.edit = edit
        self.editedAt = editedAt
    }

    /// Whether this is a chat message (not a recall, edit, membership or receipt-request notice).
    public var isChatMessage: Bool { recall == nil && edit == nil && group == nil && receiptRequest == nil }

    /// Whether this is the tombstone of a recalled message.
    public var isRecalled: Bool { recalled == true }

    /// Whether `type` is a message type a client may send: 1–64 characters of `[A-Za-z0-9._:-]`, starting with a
    /// letter. `text` is the default and travels as no type at all.
    public static func isValidType(_ type: String) -> Bool {
        guard (1...64).contains(type.utf8.count), let first = type.utf8.first, isLetter(first) else { return false }
        return type.utf8.allSatisfy { isLetter($0) || (48...57).contains($0) || $0 == 46 || $0 == 95 || $0 == 58 || $0 == 45 }
    }

    /// The most UTF-8 bytes an ``ext`` may hold, keys and values together.
    public static let maxExtBytes = 4_096

    /// Whether `ext` is one a client may send: at most 64 keys, each 1–64 characters, and at most ``maxExtBytes``
    /// UTF-8 bytes of keys and values together. An empty dictionary is the same as none.
    public static func isValidExt(_ ext: [String: String]) -> Bool {
        guard ext.count <= 64 else { return false }
        var bytes = 0
        for (key, value) in ext {
            guard (1...64).contains(key.count) else { return false }
            bytes += key.utf8.count + value.utf8.count
        }
        return bytes <= maxExtBytes
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (65...90).contains(byte) || (97...122).contains(byte) }

    enum CodingKeys: String, CodingKey {
        case id, conversation, seq
        case clientID = "clientId"
        case sender, time, type, body, replyTo, quote, recall, recalled, needsReadReceipt, group, receiptRequest, ext, edit
        case editedAt
    }
}

/// What a device needs to know about one conversation to catch up: its members, how far its log goes, how far
/// each member has received and read it, and the caller's unread count.
///
/// It is the conversation as the caller sees it: the caller's own entry in `receipts` has its own reading position
/// (private reads included); the other members' entries have what they share.
public struct ConversationState: Hashable, Sendable, Codable {
    public let id: ConversationID
    public let kind: ConversationKind
    public let members: [AccountID]
    /// The seq of the newest message (0 when empty).
    public let lastSeq: Seq
    /// Time of the newest message.
    public let lastTime: Timestamp
    /// Per member: the delivery and read watermarks.
    public let receipts: [MemberReceipts]
    /// The caller's unread count. In a `sync` ack it comes with the page that completes the sync (`hasMore ==
    /// false`) and is `nil` on earlier pages, because counting costs O(unread) per conversation.
    public private(set) var unreadCount: Int?
    /// For a group: its size and the caller's role. `members` is then empty and `receipts` holds only the caller's
    /// own entry — a group may have 100,000 members; page them with `groupMembers`.
    public let group: GroupState?
    /// Set in a `sync` ack when the server started this conversation later than seq 0 because the request asked for
    /// `recent` entries only (a new install): the device holds the log from `syncFrom + 1`; older entries come from
    /// `history` (NIM "roaming"). Every entry the caller has not read is always above it.
    public private(set) var syncFrom: Seq?
    /// The caller's own view of the conversation (cleared, deleted for it, muted, pinned; ADR 0029); `nil` when it
    /// has none of these.
    public private(set) var view: ConversationView?

    public init(
        id: ConversationID,
        kind: ConversationKind,
        members: [AccountID],
        lastSeq: Seq,
        lastTime: Timestamp,
        receipts: [MemberReceipts],
        unreadCount: Int? = nil,
        group: GroupState? = nil,
        syncFrom: Seq? = nil,
        view: ConversationView? = nil
    ) {
        self.id = id
        self.kind = kind
        self.members = members
        self.lastSeq = lastSeq
        self.lastTime = lastTime
        self.receipts = receipts
        self.unreadCount = unreadCount
        self.group = group
        self.syncFrom = syncFrom
        self.view = view == ConversationView.none ? nil : view
    }

    /// Where the caller's log begins: it holds the entries after this seq — 0, or in a group the seq before the
    /// entry that added the caller.
    public var logStart: Seq { group.map { Seq($0.joinedSeq.rawValue - 1) } ?? .zero }

    /// The same state with the caller's unread count.
    public func with(unreadCount: Int) -> ConversationState {
        var copy = self
        copy.unreadCount = unreadCount
        return copy
    }

    /// The same state with the caller's view.
    public func with(view: ConversationView?) -> ConversationState {
        var copy = self
        copy.view = view == ConversationView.none ? nil : view
        return copy
    }

    /// The same state, synced from `syncFrom`.
    public func with(syncFrom: Seq) -> ConversationState {
        var copy = self
        copy.syncFrom = syncFrom
        return copy
    }
}

/// How far one member has received and read a conversation.
public struct MemberReceipts: Hashable, Sendable, Codable {
    public let account: AccountID
    public let delivered: Watermark
    public let read: Watermark
    /// Messages above `read` read one by one (message read acks), ascending.
    public let readSeqs: [Seq]
    public init(account: AccountID, delivered: Watermark, read: Watermark, readSeqs: [Seq] = []) {
        self.account = account
        self.delivered = delivered
        self.read = read
        self.readSeqs = readSeqs
    }
}

/// Limits the server enforces, published in the `connect` ack.
public struct ServerLimits: Hashable, Sendable, Codable {
    /// Largest accepted client frame, in bytes of UTF-8 JSON.
    public let maxFrameBytes: Int
    /// Largest accepted message body, in UTF-8 bytes.
    public let maxBodyBytes: Int
    /// Most messages one `sync` or `history` ack carries.
    public let maxPageSize: Int
    /// Frames queued for one device before the server disconnects it as too slow (it then reconnects and syncs).
    public let outboundQueueFrames: Int
    /// Bytes of frames queued for one device before the server disconnects it as too slow (a frame larger than this
    /// is still sent when nothing else is queued). Absent from servers before it was published.
    public let outboundQueueBytes: Int?
    /// Requests one connection may have in flight (sent, not yet answered): the server works on up to this many at
    /// once, answering in request order; past it, it reads the next frame when one is answered. Absent from servers
    /// before pipelining (treat as 1).
    public let maxRequestsInFlight: Int?
    /// How long after sending its sender may recall a message, in milliseconds (`--recall-window-seconds`). Absent
    /// from servers before it was published.
    public let recallWindowMilliseconds: Int64?
    /// How long after sending a group's owner or an admin may recall someone else's message, in milliseconds. Absent
    /// from servers before it was published.
    public let managerRecallWindowMilliseconds: Int64?
    /// How long after sending a message may be edited, in milliseconds (`--edit-window-seconds`; 0: edits are off).
    /// Absent from servers before edits.
    public let editWindowMilliseconds: Int64?

    public init(
        maxFrameBytes: Int,
        maxBodyBytes: Int,
        maxPageSize: Int,
        outboundQueueFrames: Int,
        outboundQueueBytes: Int? = nil,
        maxRequestsInFlight: Int? = nil,
        recallWindowMilliseconds: Int64? = nil,
        managerRecallWindowMilliseconds: Int64? = nil,
        editWindowMilliseconds: Int64? = nil
    ) {
        self.maxFrameBytes = maxFrameBytes
        self.maxBodyBytes = maxBodyBytes
        self.maxPageSize = maxPageSize
        self.outboundQueueFrames = outboundQueueFrames
        self.outboundQueueBytes = outboundQueueBytes
        self.maxRequestsInFlight = maxRequestsInFlight
        self.recallWindowMilliseconds = recallWindowMilliseconds
        self.managerRecallWindowMilliseconds = managerRecallWindowMilliseconds
        self.editWindowMilliseconds = editWindowMilliseconds
    }
}
