// Courier — Apache-2.0

/// A frame a client sends. On the wire: `{"type": "send", "id": "7", "data": {…}}`.
///
/// Every client frame is a request: the server answers it with exactly one `ack` or one `error` that carries the
/// same `id`.
public enum ClientFrame: Hashable, Sendable {
    case connect(RequestID, ConnectRequest)
    case send(RequestID, SendRequest)
    case sync(RequestID, SyncRequest)
    case history(RequestID, HistoryRequest)
    case deliver(RequestID, DeliverRequest)
    case read(RequestID, ReadRequest)
    case readReceiptSettings(RequestID, ReadReceiptSettingsRequest)
    case unread(RequestID)
    case recall(RequestID, RecallRequest)
    case edit(RequestID, EditRequest)
    case react(RequestID, ReactRequest)
    case reactions(RequestID, ReactionsRequest)
    case reactionList(RequestID, ReactionListRequest)
    case createGroup(RequestID, CreateGroupRequest)
    case groupChange(RequestID, GroupChangeRequest)
    case groupMembers(RequestID, GroupMembersRequest)
    case requestReadReceipts(RequestID, RequestReadReceiptsRequest)
    case receiptCounts(RequestID, ReceiptCountsRequest)
    case receiptList(RequestID, ReceiptListRequest)
    case pushToken(RequestID, PushTokenRequest)
    case changeView(RequestID, ChangeViewRequest)
    case typing(RequestID, TypingRequest)
    case typingSettings(RequestID, TypingSettingsRequest)
    case setAccountProfile(RequestID, SetAccountProfileRequest)
    case accountProfiles(RequestID, AccountProfilesRequest)
    case ping(RequestID)

    /// The request id of the frame.
    public var requestID: RequestID {
        switch self {
        case .connect(let id, _), .send(let id, _), .sync(let id, _), .history(let id, _), .deliver(let id, _),
            .read(let id, _), .readReceiptSettings(let id, _), .unread(let id), .recall(let id, _),
            .edit(let id, _), .react(let id, _), .reactions(let id, _), .reactionList(let id, _),
            .createGroup(let id, _), .groupChange(let id, _), .groupMembers(let id, _),
            .requestReadReceipts(let id, _), .receiptCounts(let id, _), .receiptList(let id, _),
            .pushToken(let id, _), .changeView(let id, _), .typing(let id, _), .typingSettings(let id, _),
            .setAccountProfile(let id, _), .accountProfiles(let id, _), .ping(let id):
            return id
        }
    }

    /// The frame's `type` on the wire.
    public var type: FrameType {
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

/// The `type` of a client frame, which is also the `request` named in its ack.
public struct FrameType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static let connect = FrameType(rawValue: "connect")
    public static let send = FrameType(rawValue: "send")
    public static let sync = FrameType(rawValue: "sync")
    public static let history = FrameType(rawValue: "history")
    public static let deliver = FrameType(rawValue: "deliver")
    public static let read = FrameType(rawValue: "read")
    public static let readReceiptSettings = FrameType(rawValue: "readReceiptSettings")
    public static let unread = FrameType(rawValue: "unread")
    public static let recall = FrameType(rawValue: "recall")
    public static let edit = FrameType(rawValue: "edit")
    public static let react = FrameType(rawValue: "react")
    public static let reactions = FrameType(rawValue: "reactions")
    public static let reactionList = FrameType(rawValue: "reactionList")
    public static let createGroup = FrameType(rawValue: "createGroup")
    public static let groupChange = FrameType(rawValue: "groupChange")
    public static let groupMembers = FrameType(rawValue: "groupMembers")
    public static let requestReadReceipts = FrameType(rawValue: "requestReadReceipts")
    public static let receiptCounts = FrameType(rawValue: "receiptCounts")
    public static let receiptList = FrameType(rawValue: "receiptList")
    public static let pushToken = FrameType(rawValue: "pushToken")
    public static let changeView = FrameType(rawValue: "changeView")
    public static let typing = FrameType(rawValue: "typing")
    public static let typingSettings = FrameType(rawValue: "typingSettings")
    public static let setAccountProfile = FrameType(rawValue: "setAccountProfile")
    public static let accountProfiles = FrameType(rawValue: "accountProfiles")
    public static let ping = FrameType(rawValue: "ping")
}

extension ClientFrame: Codable {
    enum CodingKeys: String, CodingKey { case type, id, data }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(FrameType.self, forKey: .type)
        let id = try container.decode(RequestID.self, forKey: .id)
        func payload<T: Decodable>() throws -> T { try container.decode(T.self, forKey: .data) }
        switch type {
        case .connect: self = .connect(id, try payload())
        case .send: self = .send(id, try payload())
        case .sync: self = .sync(id, try payload())
        case .history: self = .history(id, try payload())
        case .deliver: self = .deliver(id, try payload())
        case .read: self = .read(id, try payload())
        case .readReceiptSettings: self = .readReceiptSettings(id, try payload())
        case .unread: self = .unread(id)
        case .recall: self = .recall(id, try payload())
        case .edit: self = .edit(id, try payload())
        case .react: self = .react(id, try payload())
        case .reactions: self = .reactions(id, try payload())
        case .reactionList: self = .reactionList(id, try payload())
        case .createGroup: self = .createGroup(id, try payload())
        case .groupChange: self = .groupChange(id, try payload())
        case .groupMembers: self = .groupMembers(id, try payload())
        case .requestReadReceipts: self = .requestReadReceipts(id, try payload())
        case .receiptCounts: self = .receiptCounts(id, try payload())
        case .receiptList: self = .receiptList(id, try payload())
        case .pushToken: self = .pushToken(id, try payload())
        case .changeView: self = .changeView(id, try payload())
        case .typing: self = .typing(id, try payload())
        case .typingSettings: self = .typingSettings(id, try payload())
        case .setAccountProfile: self = .setAccountProfile(id, try payload())
        case .accountProfiles: self = .accountProfiles(id, try payload())
        case .ping: self = .ping(id)
        default: throw FrameDecodingError.unknownType(type.rawValue)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(requestID, forKey: .id)
        if let data { try container.encode(data, forKey: .data) }
    }

    /// The frame's `data` member; `nil` for the frames that have none.
    var data: (any Encodable)? {
        switch self {
        case .connect(_, let data): data
        case .send(_, let data): data
        case .sync(_, let data): data
        case .history(_, let data): data
        case .deliver(_, let data): data
        case .read(_, let data): data
        case .readReceiptSettings(_, let data): data
        case .recall(_, let data): data
        case .edit(_, let data): data
        case .react(_, let data): data
        case .reactions(_, let data): data
        case .reactionList(_, let data): data
        case .createGroup(_, let data): data
        case .groupChange(_, let data): data
        case .groupMembers(_, let data): data
        case .requestReadReceipts(_, let data): data
        case .receiptCounts(_, let data): data
        case .receiptList(_, let data): data
        case .pushToken(_, let data): data
        case .changeView(_, let data): data
        case .typing(_, let data): data
        case .typingSettings(_, let data): data
        case .setAccountProfile(_, let data): data
        case .accountProfiles(_, let data): data
        case .unread, .ping: nil
        }
    }
}

/// Why a frame could not be decoded.
public enum FrameDecodingError: Error, Hashable, Sendable {
    /// The frame's `type` is unknown.
    case unknownType(String)
}
