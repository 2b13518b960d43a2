// Courier — Apache-2.0

/// The objects of the frames ``ServerFrameScanner`` reads, field by field as their `Codable` conformances name them.
/// A required field missing, or a value of another kind, is ``JSONScanner/Unreadable``: the frame then goes to
/// `JSONDecoder`, which says what is wrong.
extension JSONScanner {
    mutating func syncAck() throws -> SyncAck {
        var conversations: [ConversationState]?
        var messages: [WireMessage]?
        var hasMore: Bool?
        var since: String?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "messages") {
                messages = try array { try $0.message() }
            } else if self.key(key, is: "conversations") {
                conversations = try array { try $0.conversationState() }
            } else if self.key(key, is: "hasMore") {
                hasMore = try bool()
            } else if self.key(key, is: "since") {
                since = try optionalString()
            } else {
                try skipValue()
            }
        }
        guard let conversations, let messages, let hasMore else { throw Unreadable() }
        return SyncAck(conversations: conversations, messages: messages, hasMore: hasMore, since: since)
    }

    mutating func historyAck() throws -> HistoryAck {
        var messages: [WireMessage]?
        var hasMore: Bool?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "messages") {
                messages = try array { try $0.message() }
            } else if self.key(key, is: "hasMore") {
                hasMore = try bool()
            } else {
                try skipValue()
            }
        }
        guard let messages, let hasMore else { throw Unreadable() }
        return HistoryAck(messages: messages, hasMore: hasMore)
    }

    mutating func sendAck() throws -> SendAck {
        var message: WireMessage?
        var duplicate: Bool?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "message") {
                message = try self.message()
            } else if self.key(key, is: "duplicate") {
                duplicate = try bool()
            } else {
                try skipValue()
            }
        }
        guard let message, let duplicate else { throw Unreadable() }
        return SendAck(message: message, duplicate: duplicate)
    }

    mutating func message() throws -> WireMessage {
        var id: String?, conversation: String?, clientID: String?, sender: String?, body: String?
        var seq: Int64?, time: Int64?
        var type: String?, replyTo: String?, quote: String?, receiptRequest: String?
        var recall: WireRecallNotice?, group: WireGroupChange?
        var recalled: Bool?, needsReadReceipt: Bool?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "body") {
                body = try string()
            } else if self.key(key, is: "id") {
                id = try string()
            } else if self.key(key, is: "seq") {
                seq = try int64()
            } else if self.key(key, is: "time") {
                time = try int64()
            } else if self.key(key, is: "sender") {
                sender = try string()
            } else if self.key(key, is: "clientId") {
                clientID = try string()
            } else if self.key(key, is: "conversation") {
                conversation = try string()
            } else if self.key(key, is: "type") {
                type = try optionalString()
            } else if self.key(key, is: "replyTo") {
                replyTo = try optionalString()
            } else if self.key(key, is: "quote") {
                quote = try optionalString()
            } else if self.key(key, is: "recalled") {
                recalled = try null() ? nil : bool()
            } else if self.key(key, is: "needsReadReceipt") {
                needsReadReceipt = try null() ? nil : bool()
            } else if self.key(key, is: "receiptRequest") {
                receiptRequest = try optionalString()
            } else if self.key(key, is: "recall") {
                recall = try null() ? nil : recallNotice()
            } else if self.key(key, is: "group") {
                group = try null() ? nil : groupChange()
            } else {
                try skipValue()
            }
        }
        guard let id, let conversation, let seq, let clientID, let sender, let time, let body else {
            throw Unreadable()
        }
        return WireMessage(
            id: MessageID(rawValue: id),
            conversation: ConversationID(rawValue: conversation),
            seq: Seq(seq),
            clientID: ClientMessageID(rawValue: clientID),
            sender: AccountID(rawValue: sender),
            time: Timestamp(milliseconds: time),
            type: type,
            body: body,
            replyTo: replyTo.map(MessageID.init(rawValue:)),
            quote: quote,
            recall: recall,
            recalled: recalled,
            needsReadReceipt: needsReadReceipt,
            group: group,
            receiptRequest: receiptRequest.map(MessageID.init(rawValue:))
        )
    }

    mutating func recallNotice() throws -> WireRecallNotice {
        var messageID: String?, sender: String?, recalledBy: String?, mode: String?
        var postscript: String?, ext: String?, pushText: String?, pushPayload: String?
        var countsAsUnread: Bool?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "messageId") {
                messageID = try string()
            } else if self.key(key, is: "sender") {
                sender = try string()
            } else if self.key(key, is: "recalledBy") {
                recalledBy = try string()
            } else if self.key(key, is: "mode") {
                mode = try string()
            } else if self.key(key, is: "postscript") {
                postscript = try optionalString()
            } else if self.key(key, is: "ext") {
                ext = try optionalString()
            } else if self.key(key, is: "pushText") {
                pushText = try optionalString()
            } else if self.key(key, is: "pushPayload") {
                pushPayload = try optionalString()
            } else if self.key(key, is: "countsAsUnread") {
                countsAsUnread = try bool()
            } else {
                try skipValue()
            }
        }
        guard let messageID, let sender, let recalledBy, let mode, let countsAsUnread else { throw Unreadable() }
        return WireRecallNotice(
            messageID: MessageID(rawValue: messageID),
            sender: AccountID(rawValue: sender),
            recalledBy: AccountID(rawValue: recalledBy),
            mode: RecallMode(rawValue: mode),
            postscript: postscript,
            ext: ext,
            pushText: pushText,
            pushPayload: pushPayload,
            countsAsUnread: countsAsUnread
        )
    }

    mutating func groupChange() throws -> WireGroupChange {
        var action: WireGroupChange.Action?
        var accounts: [AccountID]?
        var role: MemberRole?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "action") {
                guard let value = WireGroupChange.Action(rawValue: try string()) else { throw Unreadable() }
                action = value
            } else if self.key(key, is: "accounts") {
                accounts = try array { AccountID(rawValue: try $0.string()) }
            } else if self.key(key, is: "role") {
                role = try null() ? nil : memberRole()
            } else {
                try skipValue()
            }
        }
        guard let action, let accounts else { throw Unreadable() }
        return WireGroupChange(action: action, accounts: accounts, role: role)
    }

    mutating func conversationState() throws -> ConversationState {
        var id: String?
        var kind: ConversationKind?
        var members: [AccountID]?
        var lastSeq: Int64?, lastTime: Int64?
        var receipts: [MemberReceipts]?
        var unreadCount: Int64?, syncFrom: Int64?
        var group: GroupState?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "id") {
                id = try string()
            } else if self.key(key, is: "kind") {
                guard let value = ConversationKind(rawValue: try string()) else { throw Unreadable() }
                kind = value
            } else if self.key(key, is: "members") {
                members = try array { AccountID(rawValue: try $0.string()) }
            } else if self.key(key, is: "lastSeq") {
                lastSeq = try int64()
            } else if self.key(key, is: "lastTime") {
                lastTime = try int64()
            } else if self.key(key, is: "receipts") {
                receipts = try array { try $0.memberReceipts() }
            } else if self.key(key, is: "unreadCount") {
                unreadCount = try null() ? nil : int64()
            } else if self.key(key, is: "syncFrom") {
                syncFrom = try null() ? nil : int64()
            } else if self.key(key, is: "group") {
                group = try null() ? nil : groupState()
            } else {
                try skipValue()
            }
        }
        guard let id, let kind, let members, let lastSeq, let lastTime, let receipts else { throw Unreadable() }
        return ConversationState(
            id: ConversationID(rawValue: id),
            kind: kind,
            members: members,
            lastSeq: Seq(lastSeq),
            lastTime: Timestamp(milliseconds: lastTime),
            receipts: receipts,
            unreadCount: try unreadCount.map(Self.int),
            group: group,
            syncFrom: syncFrom.map { Seq($0) }
        )
    }

    mutating func memberReceipts() throws -> MemberReceipts {
        var account: String?
        var delivered: Watermark?, read: Watermark?
        var readSeqs: [Seq]?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "account") {
                account = try string()
            } else if self.key(key, is: "delivered") {
                delivered = try watermark()
            } else if self.key(key, is: "read") {
                read = try watermark()
            } else if self.key(key, is: "readSeqs") {
                readSeqs = try array { Seq(try $0.int64()) }
            } else {
                try skipValue()
            }
        }
        guard let account, let delivered, let read, let readSeqs else { throw Unreadable() }
        return MemberReceipts(account: AccountID(rawValue: account), delivered: delivered, read: read, readSeqs: readSeqs)
    }

    mutating func watermark() throws -> Watermark {
        var seq: Int64?, time: Int64?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "seq") {
                seq = try int64()
            } else if self.key(key, is: "time") {
                time = try int64()
            } else {
                try skipValue()
            }
        }
        guard let seq, let time else { throw Unreadable() }
        return Watermark(seq: Seq(seq), time: Timestamp(milliseconds: time))
    }

    mutating func groupState() throws -> GroupState {
        var memberCount: Int64?, joinedSeq: Int64?
        var role: MemberRole?
        var previous: Key?
        try beginObject()
        while let key = try nextKey(&previous) {
            if self.key(key, is: "memberCount") {
                memberCount = try int64()
            } else if self.key(key, is: "role") {
                role = try memberRole()
            } else if self.key(key, is: "joinedSeq") {
                joinedSeq = try int64()
            } else {
                try skipValue()
            }
        }
        guard let memberCount, let role, let joinedSeq else { throw Unreadable() }
        return GroupState(memberCount: try Self.int(memberCount), role: role, joinedSeq: Seq(joinedSeq))
    }

    mutating func memberRole() throws -> MemberRole {
        guard let role = MemberRole(rawValue: try string()) else { throw Unreadable() }
        return role
    }

    mutating func optionalString() throws -> String? { try null() ? nil : string() }

    static func int(_ value: Int64) throws -> Int {
        guard let int = Int(exactly: value) else { throw Unreadable() }
        return int
    }
}
