// Courier — Apache-2.0
public import CourierWire

/// A message to append. `id` and `time` are assigned by the server before the call; `seq` inside it.
public struct MessageDraft: Hashable, Sendable {
    public let id: MessageID
    public let conversation: ConversationID
    public let clientID: ClientMessageID
    public let sender: AccountID
    public let time: Timestamp
    /// What the body holds (`nil` for text; see `WireMessage.type`).
    public let type: String?
    public let body: String
    public let replyTo: MessageID?
    /// The excerpt of the replied-to message, taken by the server.
    public private(set) var quote: String?
    /// Set for a recall notice.
    public let recall: WireRecallNotice?
    /// Set for an edit entry (its `body` and `ext` are the new ones).
    public let edit: WireEditNotice?
    /// A group message that asks for read receipts.
    public let needsReadReceipt: Bool
    /// Set for a membership change.
    public private(set) var group: WireGroupChange?
    /// Set for a request for read receipts: the message asked about.
    public let receiptRequest: MessageID?
    /// The sender's key-values (``WireMessage/ext``), validated by the service.
    public let ext: [String: String]?
    /// Who learns of it beyond the conversation's log.
    public var announcement = Announcement.everyone
    public init(
        id: MessageID,
        conversation: ConversationID,
        clientID: ClientMessageID,
        sender: AccountID,
        time: Timestamp,
        type: String? = nil,
        body: String,
        replyTo: MessageID? = nil,
        quote: String? = nil,
        recall: WireRecallNotice? = nil,
        needsReadReceipt: Bool = false,
        group: WireGroupChange? = nil,
        receiptRequest: MessageID? = nil,
        ext: [String: String]? = nil,
        edit: WireEditNotice? = nil
    ) {
        self.id = id
        self.conversation = conversation
        self.clientID = clientID
        self.sender = sender
        self.time = time
        self.type = type
        self.body = body
        self.replyTo = replyTo
        self.quote = quote
        self.recall = recall
        self.needsReadReceipt = needsReadReceipt
        self.group = group
        self.receiptRequest = receiptRequest
        self.ext = ext
        self.edit = edit
    }

    /// Whether the entry counts as unread for the other members: a message does; a recall notice only if asked;
    /// edits, membership changes and receipt requests never.
    public var countsAsUnread: Bool {
        if group != nil || receiptRequest != nil || edit != nil { return false }
        return recall?.countsAsUnread ?? true
    }
}

extension MessageDraft {
    /// Who learns of a new entry beyond the conversation's log, where devices find it when they sync.
    public enum Announcement: Hashable, Sendable {
        /// Webhooks (`message.created` …), a push to recipients who lack it (`message.undelivered`), other nodes
        /// and this node's devices: a live entry.
        case everyone
        /// The same without the push: a purge's recall notices (ADR 0028).
        case withoutPush
        /// Nobody: imported history (docs/import.md). No webhook event, no push, no notification to other nodes.
        case nobody
    }

    /// The same draft quoting `quote` (``ReplyQuote``).
    public func with(quote: String?) -> MessageDraft {
        var copy = self
        copy.quote = quote
        return copy
    }

    /// The same draft with another membership change.
    public func with(group: WireGroupChange) -> MessageDraft {
        var copy = self
        copy.group = group
        return copy
    }

    /// The stored message once the append assigned it `seq` (and `time`, when it had to be raised).
    public func message(at seq: Seq, time: Timestamp? = nil) -> WireMessage {
        WireMessage(
            id: id,
            conversation: conversation,
            seq: seq,
            clientID: clientID,
            sender: sender,
            time: time ?? self.time,
            type: type,
            body: body,
            replyTo: replyTo,
            quote: quote,
            recall: recall,
            needsReadReceipt: needsReadReceipt ? true : nil,
            group: group,
            receiptRequest: receiptRequest,
            ext: ext,
            edit: edit
        )
    }
}

/// The outcome of ``MessageStore/append(_:)``: the entry the requester is answered with and the change the append
/// made, built in its transaction once the statement that assigned the entry's seq and time returned (ADR 0057).
public struct AppendOutcome: Hashable, Sendable {
    public let message: WireMessage
    /// `true` when `(sender, clientID)` was stored before; `message` is the original.
    public let isDuplicate: Bool
    /// What the append changed, which its webhook events, its notification and its publications are derived from;
    /// none for a duplicate (the original was told) or an entry announced to nobody (imported history).
    public let change: Change?

    /// A new entry appended under the group's membership version `membershipSeq` (read in the appending transaction:
    /// the seq of the newest membership change before it; `nil` outside a group), told as `announcement` says.
    public init(appended message: WireMessage, membershipSeq: Seq?, announcement: MessageDraft.Announcement) {
        self.message = message
        self.isDuplicate = false
        self.change =
            announcement == .nobody
            ? nil : .appended(message, membershipSeq: membershipSeq, pushes: announcement == .everyone)
    }

    /// The entry stored earlier under the same `(sender, clientID)`.
    public init(duplicateOf original: WireMessage) {
        self.message = original
        self.isDuplicate = true
        self.change = nil
    }
}

/// The outcome of moving a delivery watermark: the watermark the requester is answered with and the change the
/// write made (ADR 0057).
public struct DeliveryOutcome: Hashable, Sendable {
    /// The watermark now stored.
    public let watermark: Watermark
    /// What the write changed: `account`'s delivery watermark, when it moved.
    public let change: Change?
    /// Whether it moved.
    public var advanced: Bool { change != nil }

    /// `account`'s delivery watermark in `conversation` as stored now, moved at `time` when `advanced`.
    public init(
        _ account: AccountID,
        in conversation: ConversationID,
        watermark: Watermark,
        advanced: Bool,
        at time: Timestamp
    ) {
        self.watermark = watermark
        self.change = advanced ? .delivered(conversation, account: account, watermark: watermark, at: time) : nil
    }
}
