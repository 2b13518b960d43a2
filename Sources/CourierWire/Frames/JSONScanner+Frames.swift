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
        try object { scanner, key in
            if scanner.key(key, is: "messages") {
                messages = try scanner.array { try $0.message() }
            } else if scanner.key(key, is: "conversations") {
                conversations = try scanner.array { try $0.conversationState() }
            } else if scanner.key(key, is: "hasMore") {
                hasMore = try scanner.bool()
            } else if scanner.key(key, is: "since") {
                since = try scanner.optionalString()
            } else {
                try scanner.skipValue()
            }
        }
        guard let conversations, let messages, let hasMore else { throw Unreadable() }
        return SyncAck(conversations: conversations, messages: messages, hasMore: hasMore, since: since)
    }

    mutating func historyAck() throws -> HistoryAck {
        var messages: [WireMessage]?
        var hasMore: Bool?
        try object { scanner, key in
            if scanner.key(key, is: "messages") {
                messages = try scanner.array { try $0.message() }
            } else if scanner.key(key, is: "hasMore") {
                hasMore = try scanner.bool()
            } else {
                try scanner.skipValue()
            }
        }
        guard let messages, let hasMore else { throw Unreadable() }
        return HistoryAck(messages: messages, hasMore: hasMore)
    }

    mutating func sendAck() throws -> SendAck {
        var message: WireMessage?
        var duplicate: Bool?
        try object { scanner, key in
            if scanner.key(key, is: "message") {
                message = try scanner.message()
            } else if scanner.key(key, is: "duplicate") {
                duplicate = try scanner.bool()
            } else {
                try scanner.skipValue()
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
        var ext: [String: String]?
        try object { scanner, key in
            if scanner.key(key, is: "body") {
                body = try scanner.string()
            } else if scanner.key(key, is: "id") {
                id = try scanner.string()
            } else if scanner.key(key, is: "seq") {
                seq = try scanner.int64()
            } else if scanner.key(key, is: "time") {
                time = try scanner.int64()
            } else if scanner.key(key, is: "sender") {
                sender = try scanner.string()
            } else if scanner.key(key, is: "clientId") {
                clientID = try scanner.string()
            } else if scanner.key(key, is: "conversation") {
                conversation = try scanner.string()
            } else if scanner.key(key, is: "ext") {
                ext = try scanner.null() ? nil : scanner.stringMap()
            } else if scanner.key(key, is: "type") {
                type = try scanner.optionalString()
            } else if scanner.key(key, is: "replyTo") {
                replyTo = try scanner.optionalString()
            } else if scanner.key(key, is: "quote") {
                quote = try scanner.optionalString()
            } else if scanner.key(key, is: "recalled") {
                recalled = try scanner.optionalBool()
            } else if scanner.key(key, is: "needsReadReceipt") {
                needsReadReceipt = try scanner.optionalBool()
            } else if scanner.key(key, is: "receiptRequest") {
                receiptRequest = try scanner.optionalString()
            } else if scanner.key(key, is: "recall") {
                recall = try scanner.null() ? nil : scanner.recallNotice()
            } else if scanner.key(key, is: "group") {
                group = try scanner.null() ? nil : scanner.groupChange()
            } else {
                try scanner.skipValue()
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
            receiptRequest: receiptRequest.map(MessageID.init(rawValue:)),
            ext: ext
        )
    }

    /// A key's text (keys with escapes never get here: ``object(ordered:_:)`` gives up on them).
    func keyString(_ key: Key) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[key.start..<(key.start + key.count)]), as: UTF8.self)
    }

    /// An object of string values (a message's `ext`), keys in any order; a repeated key is unreadable here (the
    /// `JSONDecoder` path says what is wrong).
    mutating func stringMap() throws -> [String: String] {
        var map: [String: String] = [:]
        try object(ordered: false) { scanner, key in
            let name = scanner.keyString(key)
            guard map.updateValue(try scanner.string(), forKey: name) == nil else { throw Unreadable() }
        }
        return map
    }

    mutating func recallNotice() throws -> WireRecallNotice {
        var messageID: String?, sender: String?, recalledBy: String?, mode: String?
        var postscript: String?, ext: String?, pushText: String?, pushPayload: String?
        var countsAsUnread: Bool?, byApp: Bool?
        try object { scanner, key in
            if scanner.key(key, is: "messageId") {
                messageID = try scanner.string()
            } else if scanner.key(key, is: "sender") {
                sender = try scanner.string()
            } else if scanner.key(key, is: "recalledBy") {
                recalledBy = try scanner.string()
            } else if scanner.key(key, is: "mode") {
                mode = try scanner.string()
            } else if scanner.key(key, is: "postscript") {
                postscript = try scanner.optionalString()
            } else if scanner.key(key, is: "ext") {
                ext = try scanner.optionalString()
            } else if scanner.key(key, is: "pushText") {
                pushText = try scanner.optionalString()
            } else if scanner.key(key, is: "pushPayload") {
                pushPayload = try scanner.optionalString()
            } else if scanner.key(key, is: "countsAsUnread") {
                countsAsUnread = try scanner.bool()
            } else if scanner.key(key, is: "byApp") {
                byApp = try scanner.optionalBool()
            } else {
                try scanner.skipValue()
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
            countsAsUnread: countsAsUnread,
            byApp: byApp
        )
    }

    mutating func groupChange() throws -> WireGroupChange {
        var action: WireGroupChange.Action?
        var accounts: [AccountID]?
        var role: MemberRole?
        try object { scanner, key in
            if scanner.key(key, is: "action") {
                guard let value = WireGroupChange.Action(rawValue: try scanner.string()) else { throw Unreadable() }
                action = value
            } else if scanner.key(key, is: "accounts") {
                accounts = try scanner.array { AccountID(rawValue: try $0.string()) }
            } else if scanner.key(key, is: "role") {
                role = try scanner.null() ? nil : scanner.memberRole()
            } else {
                try scanner.skipValue()
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
        var view: ConversationView?
        try object { scanner, key in
            if scanner.key(key, is: "id") {
                id = try scanner.string()
            } else if scanner.key(key, is: "kind") {
                guard let value = ConversationKind(rawValue: try scanner.string()) else { throw Unreadable() }
                kind = value
            } else if scanner.key(key, is: "members") {
                members = try scanner.array { AccountID(rawValue: try $0.string()) }
            } else if scanner.key(key, is: "lastSeq") {
                lastSeq = try scanner.int64()
            } else if scanner.key(key, is: "lastTime") {
                lastTime = try scanner.int64()
            } else if scanner.key(key, is: "receipts") {
                receipts = try scanner.array { try $0.memberReceipts() }
            } else if scanner.key(key, is: "unreadCount") {
                unreadCount = try scanner.optionalInt64()
            } else if scanner.key(key, is: "syncFrom") {
                syncFrom = try scanner.optionalInt64()
            } else if scanner.key(key, is: "group") {
                group = try scanner.null() ? nil : scanner.groupState()
            } else if scanner.key(key, is: "view") {
                view = try scanner.null() ? nil : scanner.conversationView()
            } else {
                try scanner.skipValue()
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
            syncFrom: syncFrom.map { Seq($0) },
            view: view
        )
    }

    mutating func conversationView() throws -> ConversationView {
        var cleared: Int64?, pinnedAt: Int64?
        var deletedSeqs: [Seq]?
        var muted: Bool?
        try object { scanner, key in
            if scanner.key(key, is: "cleared") {
                cleared = try scanner.int64()
            } else if scanner.key(key, is: "deletedSeqs") {
                deletedSeqs = try scanner.array { Seq(try $0.int64()) }
            } else if scanner.key(key, is: "muted") {
                muted = try scanner.bool()
            } else if scanner.key(key, is: "pinnedAt") {
                pinnedAt = try scanner.optionalInt64()
            } else {
                try scanner.skipValue()
            }
        }
        guard let cleared, let deletedSeqs, let muted else { throw Unreadable() }
        return ConversationView(
            cleared: Seq(cleared),
            deletedSeqs: deletedSeqs,
            muted: muted,
            pinnedAt: pinnedAt.map(Timestamp.init(milliseconds:))
        )
    }

    mutating func memberReceipts() throws -> MemberReceipts {
        var account: String?
        var delivered: Watermark?, read: Watermark?
        var readSeqs: [Seq]?
        try object { scanner, key in
            if scanner.key(key, is: "account") {
                account = try scanner.string()
            } else if scanner.key(key, is: "delivered") {
                delivered = try scanner.watermark()
            } else if scanner.key(key, is: "read") {
                read = try scanner.watermark()
            } else if scanner.key(key, is: "readSeqs") {
                readSeqs = try scanner.array { Seq(try $0.int64()) }
            } else {
                try scanner.skipValue()
            }
        }
        guard let account, let delivered, let read, let readSeqs else { throw Unreadable() }
        return MemberReceipts(account: AccountID(rawValue: account), delivered: delivered, read: read, readSeqs: readSeqs)
    }

    mutating func watermark() throws -> Watermark {
        var seq: Int64?, time: Int64?
        try object { scanner, key in
            if scanner.key(key, is: "seq") {
                seq = try scanner.int64()
            } else if scanner.key(key, is: "time") {
                time = try scanner.int64()
            } else {
                try scanner.skipValue()
            }
        }
        guard let seq, let time else { throw Unreadable() }
        return Watermark(seq: Seq(seq), time: Timestamp(milliseconds: time))
    }

    mutating func groupState() throws -> GroupState {
        var memberCount: Int64?, joinedSeq: Int64?
        var role: MemberRole?
        try object { scanner, key in
            if scanner.key(key, is: "memberCount") {
                memberCount = try scanner.int64()
            } else if scanner.key(key, is: "role") {
                role = try scanner.memberRole()
            } else if scanner.key(key, is: "joinedSeq") {
                joinedSeq = try scanner.int64()
            } else {
                try scanner.skipValue()
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
    mutating func optionalBool() throws -> Bool? { try null() ? nil : bool() }
    mutating func optionalInt64() throws -> Int64? { try null() ? nil : int64() }

    static func int(_ value: Int64) throws -> Int {
        guard let int = Int(exactly: value) else { throw Unreadable() }
        return int
    }
}
