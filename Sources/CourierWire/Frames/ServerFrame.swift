// Courier — Apache-2.0

/// A frame the server sends: an `ack` or `error` answering one request, or an `event`.
///
/// ```json
/// {"type": "ack", "id": "7", "request": "send", "data": {…}}
/// {"type": "error", "id": "7", "error": {"code": "message.bodyTooLarge", "message": "…"}}
/// {"type": "event", "event": "message", "data": {…}}
/// ```
public enum ServerFrame: Hashable, Sendable {
    case ack(RequestID, Ack)
    /// The id is `nil` when the request's id could not be read.
    case error(RequestID?, WireError)
    case event(ServerEvent)
}

/// The payload of an `ack`, named by the request type it answers.
public enum Ack: Hashable, Sendable {
    case connect(ConnectAck)
    case send(SendAck)
    case sync(SyncAck)
    case history(HistoryAck)
    case deliver(DeliverAck)
    case read(ReadState)
    case readReceiptSettings(ReadReceiptSettings)
    case unread(UnreadAck)
    /// The recall notice appended to the log (`duplicate`: this requester had recalled it before).
    case recall(SendAck)
    /// The edit entry appended to the log (`duplicate`: this `clientId` was used before).
    case edit(SendAck)
    /// The message's reactions after the change (or as they were, when it changed nothing).
    case react(WireReactions)
    case reactions(ReactionsAck)
    case reactionList(ReactionListAck)
    /// The group's `created` entry.
    case createGroup(SendAck)
    /// The membership change's log entry.
    case groupChange(SendAck)
    case groupMembers(GroupMembersAck)
    /// The receipt-request entry.
    case requestReadReceipts(SendAck)
    case receiptCounts(ReceiptCountsAck)
    case receiptList(ReceiptListAck)
    case pushToken(PushTokenAck)
    /// The caller's view of the conversation now.
    case changeView(ViewEvent)
    case typing(TypingAck)
    case typingSettings(TypingSettings)
    /// The caller's profile after the change.
    case setAccountProfile(AccountProfile)
    case accountProfiles(AccountProfilesAck)
    case ping(PingAck)

    var request: FrameType {
        switch self {
        case .connect: .connect
        case .send: .send
        case .sync: .sync
        case .history: .history
        case .deliver: .deliver
        case .read: .read
        case .readReceiptSettings: .readReceiptSettings
        case .unread: .unread
        case .recall: .recall
        case .edit: .edit
        case .react: .react
        case .reactions: .reactions
        case .reactionList: .reactionList
        case .createGroup: .createGroup
        case .groupChange: .groupChange
        case .groupMembers: .groupMembers
        case .requestReadReceipts: .requestReadReceipts
        case .receiptCounts: .receiptCounts
        case .receiptList: .receiptList
        case .pushToken: .pushToken
        case .changeView: .changeView
        case .typing: .typing
        case .typingSettings: .typingSettings
        case .setAccountProfile: .setAccountProfile
        case .accountProfiles: .accountProfiles
        case .ping: .ping
        }
    }
}

/// An event the server pushes without being asked.
public enum ServerEvent: Hashable, Sendable {
    case message(MessageEvent)
    case delivered(DeliveredEvent)
    case read(ReadEvent)
    case readState(ReadStateEvent)
    case groupReceipts(GroupReceiptsEvent)
    case syncRequired(SyncRequiredEvent)
    /// The account's view of a conversation changed (on another of its devices, or by the app's backend).
    case view(ViewEvent)
    /// A member is typing in a conversation, or stopped (never stored).
    case typing(TypingEvent)
    /// An account's profile changed: the caller's own (on another device, or by the app's backend) or a contact's.
    case accountProfile(AccountProfile)
    /// A member added or removed a reaction on a message (ADR 0055).
    case reaction(ReactionEvent)

    /// The event's name on the wire.
    public var name: String {
        switch self {
        case .message: "message"
        case .delivered: "delivered"
        case .read: "read"
        case .readState: "readState"
        case .groupReceipts: "groupReceipts"
        case .syncRequired: "syncRequired"
        case .view: "view"
        case .typing: "typing"
        case .accountProfile: "accountProfile"
        case .reaction: "reaction"
        }
    }
}

extension ServerFrame: Codable {
    enum CodingKeys: String, CodingKey { case type, id, request, data, error, event }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .type) {
        case "ack":
            let id = try container.decode(RequestID.self, forKey: .id)
            self = .ack(id, try Ack.decode(from: container))
        case "error":
            self = .error(
                try container.decodeIfPresent(RequestID.self, forKey: .id),
                try container.decode(WireError.self, forKey: .error)
            )
        case "event":
            self = .event(try ServerEvent.decode(from: container))
        case let other:
            throw FrameDecodingError.unknownType(other)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .ack(let id, let ack):
            try container.encode("ack", forKey: .type)
            try container.encode(id, forKey: .id)
            try ack.encode(into: &container)
        case .error(let id, let error):
            try container.encode("error", forKey: .type)
            try container.encodeIfPresent(id, forKey: .id)
            try container.encode(error, forKey: .error)
        case .event(let event):
            try container.encode("event", forKey: .type)
            try event.encode(into: &container)
        }
    }
}

extension Ack {
    static func decode(from container: KeyedDecodingContainer<ServerFrame.CodingKeys>) throws -> Ack {
        let request = try container.decode(FrameType.self, forKey: .request)
        func payload<T: Decodable>() throws -> T { try container.decode(T.self, forKey: .data) }
        switch request {
        case .connect: return .connect(try payload())
        case .send: return .send(try payload())
        case .sync: return .sync(try payload())
        case .history: return .history(try payload())
        case .deliver: return .deliver(try payload())
        case .read: return .read(try payload())
        case .readReceiptSettings: return .readReceiptSettings(try payload())
        case .unread: return .unread(try payload())
        case .recall: return .recall(try payload())
        case .edit: return .edit(try payload())
        case .react: return .react(try payload())
        case .reactions: return .reactions(try payload())
        case .reactionList: return .reactionList(try payload())
        case .createGroup: return .createGroup(try payload())
        case .groupChange: return .groupChange(try payload())
        case .groupMembers: return .groupMembers(try payload())
        case .requestReadReceipts: return .requestReadReceipts(try payload())
        case .receiptCounts: return .receiptCounts(try payload())
        case .receiptList: return .receiptList(try payload())
        case .pushToken: return .pushToken(try payload())
        case .changeView: return .changeView(try payload())
        case .typing: return .typing(try payload())
        case .typingSettings: return .typingSettings(try payload())
        case .setAccountProfile: return .setAccountProfile(try payload())
        case .accountProfiles: return .accountProfiles(try payload())
        case .ping: return .ping(try payload())
        default: throw FrameDecodingError.unknownType(request.rawValue)
        }
    }

    func encode(into container: inout KeyedEncodingContainer<ServerFrame.CodingKeys>) throws {
        try container.encode(request, forKey: .request)
        try container.encode(data, forKey: .data)
    }

    /// The ack's `data` member.
    var data: any Encodable {
        switch self {
        case .send(let data), .recall(let data), .edit(let data), .createGroup(let data), .groupChange(let data),
            .requestReadReceipts(let data):
            data
        case .connect(let data): data
        case .sync(let data): data
        case .history(let data): data
        case .deliver(let data): data
        case .read(let data): data
        case .readReceiptSettings(let data): data
        case .unread(let data): data
        case .react(let data): data
        case .reactions(let data): data
        case .reactionList(let data): data
        case .groupMembers(let data): data
        case .receiptCounts(let data): data
        case .receiptList(let data): data
        case .pushToken(let data): data
        case .changeView(let data): data
        case .typing(let data): data
        case .typingSettings(let data): data
        case .setAccountProfile(let data): data
        case .accountProfiles(let data): data
        case .ping(let data): data
        }
    }
}

extension ServerEvent {
    static func decode(from container: KeyedDecodingContainer<ServerFrame.CodingKeys>) throws -> ServerEvent {
        func payload<T: Decodable>() throws -> T { try container.decode(T.self, forKey: .data) }
        switch try container.decode(String.self, forKey: .event) {
        case "message": return .message(try payload())
        case "delivered": return .delivered(try payload())
        case "read": return .read(try payload())
        case "readState": return .readState(try payload())
        case "groupReceipts": return .groupReceipts(try payload())
        case "syncRequired": return .syncRequired(SyncRequiredEvent())
        case "view": return .view(try payload())
        case "typing": return .typing(try payload())
        case "accountProfile": return .accountProfile(try payload())
        case "reaction": return .reaction(try payload())
        case let other: throw FrameDecodingError.unknownType(other)
        }
    }

    func encode(into container: inout KeyedEncodingContainer<ServerFrame.CodingKeys>) throws {
        try container.encode(name, forKey: .event)
        switch self {
        case .message(let data): try container.encode(data, forKey: .data)
        case .delivered(let data): try container.encode(data, forKey: .data)
        case .read(let data): try container.encode(data, forKey: .data)
        case .readState(let data): try container.encode(data, forKey: .data)
        case .groupReceipts(let data): try container.encode(data, forKey: .data)
        case .syncRequired(let data): try container.encode(data, forKey: .data)
        case .view(let data): try container.encode(data, forKey: .data)
        case .typing(let data): try container.encode(data, forKey: .data)
        case .accountProfile(let data): try container.encode(data, forKey: .data)
        case .reaction(let data): try container.encode(data, forKey: .data)
        }
    }
}
