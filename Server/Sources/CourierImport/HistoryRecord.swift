// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import CourierServerCore

/// One line of Courier history lines (docs/import.md), checked: what an import applies. Every entry is announced to
/// nobody (``MessageDraft/Announcement/nobody``) and stored under its sender and its record's id, so a second import
/// of the same line stores nothing.
enum HistoryRecord: Sendable {
    /// An account, registered at `createdAt` (or when first met), with the profile it had (ADR 0053).
    case account(AccountID, createdAt: Timestamp?, profile: SetAccountProfileRequest?)
    /// A group's membership change (`created` with its members), as its log entry.
    case group(MessageDraft)
    case message(MessageDraft)
    /// `reader` had read `conversation` up to the message `upTo` at `time`.
    case read(reader: AccountID, conversation: ConversationID, upTo: MessageID, time: Timestamp, shared: Bool)
    /// `by` recalled `message` (two-way) at `time`; `id` is the notice's id.
    case recall(id: MessageID, message: MessageID, by: AccountID, time: Timestamp)

    /// The accounts it names: each is registered when first met.
    var accounts: [AccountID] {
        switch self {
        case .account(let account, _, _): [account]
        case .group(let entry): [entry.sender] + (entry.group?.accounts ?? [])
        case .message(let entry): entry.conversation.directMembers.map { [$0.0, $0.1] } ?? [entry.sender]
        case .read(let reader, _, _, _, _): [reader]
        case .recall(_, _, let by, _): [by]
        }
    }

    /// Its time (an account's creation, when it has one).
    var time: Timestamp? {
        switch self {
        case .account(_, let createdAt, _): createdAt
        case .group(let entry), .message(let entry): entry.time
        case .read(_, _, _, let time, _), .recall(_, _, _, let time): time
        }
    }
}

/// Why a line is not a history record: what an import stops at (`import.invalidRecord`).
struct InvalidHistoryLine: Error, Hashable, Sendable {
    let line: Int
    let detail: String
}

extension HistoryRecord {
    /// The fields a line may have; which are required depends on its `kind`. Unknown fields are ignored.
    struct Line: Decodable, Equatable {
        let kind: String
        let id: String?
        let createdAt: Int64?
        let group: String?
        let action: String?
        let by: String?
        let accounts: [String]?
        let role: String?
        let profile: GroupProfile?
        let time: Int64?
        let from: String?
        let to: String?
        let type: String?
        let body: String?
        let ext: [String: String]?
        let replyTo: String?
        let needsReadReceipt: Bool?
        let account: String?
        let with: String?
        let upTo: String?
        let `private`: Bool?
        let message: String?
        let displayName: String?
        let avatar: String?
    }

    /// One decoder for every line (it keeps no state between calls; making one per line was a tenth of the parse).
    private static let decoder = JSONDecoder()

    /// Parses and checks one line (numbered `number` in its file) with the limits a live request has.
    init(line text: Substring, number: Int, limits: CourierServerConfiguration.Limits) throws(InvalidHistoryLine) {
        func invalid(_ detail: String) -> InvalidHistoryLine { InvalidHistoryLine(line: number, detail: detail) }
        let line: Line
        if let scanned = Line.scan(text) {
            line = scanned
        } else {
            do {
                line = try Self.decoder.decode(Line.self, from: Data(text.utf8))
            } catch {
                throw invalid("not a history record: \(Self.describe(error))")
            }
        }
        func required<T>(_ value: T?, _ name: String) throws(InvalidHistoryLine) -> T {
            guard let value else { throw invalid("a \(line.kind) needs \(name)") }
            return value
        }
        func account(_ value: String?, _ name: String) throws(InvalidHistoryLine) -> AccountID {
            let account = AccountID(rawValue: try required(value, name))
            guard account.isValid else { throw invalid("\(name) '\(account.rawValue.prefix(200))' is not a valid account id") }
            return account
        }
        func entryID(_ value: String?) throws(InvalidHistoryLine) -> MessageID {
            let id = try required(value, "id")
            guard ClientMessageID(rawValue: id).isValid else {
                throw invalid("id '\(id.prefix(200))' is not 1–128 characters of [A-Za-z0-9._@:-]")
            }
            return MessageID(rawValue: id)
        }
        func time() throws(InvalidHistoryLine) -> Timestamp {
            let time = try required(line.time, "time")
            guard time >= 0 else { throw invalid("time must be milliseconds since 1970, not negative") }
            return Timestamp(milliseconds: time)
        }
        func group(_ value: String?) throws(InvalidHistoryLine) -> ConversationID {
            let group = GroupID(rawValue: try required(value, "group"))
            guard group.isValid else { throw invalid("group '\(group.rawValue.prefix(200))' is not a valid group id") }
            return .group(group)
        }
        /// The conversation named by `with` (direct, seen from `account`) or `group`: exactly one of them.
        func conversation(of owner: AccountID, with peerField: String?, _ name: String) throws(InvalidHistoryLine)
            -> ConversationID
        {
            switch (peerField, line.group) {
            case (let peerField?, nil):
                let peer = try account(peerField, name)
                guard peer != owner else { throw invalid("\(name) names the account itself") }
                return .direct(owner, peer)
            case (nil, let groupField?): return try group(groupField)
            default: throw invalid("a \(line.kind) names either \(name) (direct) or group")
            }
        }

        switch line.kind {
        case "account":
            if let createdAt = line.createdAt, createdAt < 0 { throw invalid("createdAt must not be negative") }
            var profile: SetAccountProfileRequest?
            if line.displayName != nil || line.avatar != nil || line.ext != nil {
                let fields = SetAccountProfileRequest(displayName: line.displayName, avatar: line.avatar, ext: line.ext)
                if let invalidity = fields.invalidity { throw invalid(invalidity) }
                profile = fields
            }
            self = .account(
                try account(line.id, "id"), createdAt: line.createdAt.map(Timestamp.init(milliseconds:)), profile: profile
            )
        case "group":
            let by = try account(line.by, "by")
            let accounts = try (line.accounts ?? []).map { value throws(InvalidHistoryLine) in try account(value, "accounts") }
            let change: WireGroupChange
            switch line.action {
            case "created": change = WireGroupChange(action: .created, accounts: Array(Set(accounts).subtracting([by])).sorted())
            case "added", "removed":
                guard !accounts.isEmpty else { throw invalid("\(line.action!) names 1 or more accounts") }
                change = WireGroupChange(action: line.action == "added" ? .added : .removed, accounts: Array(Set(accounts)).sorted())
            case "left": change = WireGroupChange(action: .left, accounts: [by])
            case "roleChanged":
                guard !accounts.isEmpty, let role = line.role.flatMap(MemberRole.init(rawValue:)), role != .owner else {
                    throw invalid("roleChanged names accounts and a role: admin or member")
                }
                change = WireGroupChange(action: .roleChanged, accounts: Array(Set(accounts)).sorted(), role: role)
            case "ownerTransferred":
                guard accounts.count == 1 else { throw invalid("ownerTransferred names exactly one account") }
                change = WireGroupChange(action: .ownerTransferred, accounts: accounts)
            case "dismissed": change = WireGroupChange(action: .dismissed, accounts: [])
            case "profileChanged":
                guard let profile = line.profile else { throw invalid("profileChanged names a profile") }
                if let invalidity = profile.invalidity { throw invalid(invalidity) }
                change = WireGroupChange(action: .profileChanged, accounts: [], profile: profile)
            default:
                throw invalid(
                    "action must be created, added, removed, left, roleChanged, ownerTransferred, dismissed or profileChanged"
                )
            }
            let id = try entryID(line.id)
            var entry = MessageDraft(
                id: id,
                conversation: try group(line.group),
                clientID: ClientMessageID(rawValue: id.rawValue),
                sender: by,
                time: try time(),
                body: "",
                group: change
            )
            entry.announcement = .nobody
            self = .group(entry)
        case "message":
            let id = try entryID(line.id)
            let from = try account(line.from, "from")
            let conversation = try conversation(of: from, with: line.to, "to")
            let body = try required(line.body, "body")
            let content: (type: String?, ext: [String: String]?)
            do {
                content = try MessageService.checkedContent(
                    clientID: ClientMessageID(rawValue: id.rawValue),
                    type: line.type,
                    body: body,
                    ext: line.ext,
                    limits: limits
                )
            } catch {
                throw invalid(error.message)
            }
            if let replyTo = line.replyTo, !ClientMessageID(rawValue: replyTo).isValid {
                throw invalid("replyTo '\(replyTo.prefix(200))' is not a valid message id")
            }
            var entry = MessageDraft(
                id: id,
                conversation: conversation,
                clientID: ClientMessageID(rawValue: id.rawValue),
                sender: from,
                time: try time(),
                type: content.type,
                body: body,
                replyTo: line.replyTo.map(MessageID.init(rawValue:)),
                needsReadReceipt: line.needsReadReceipt == true && conversation.kind == .group,
                ext: content.ext
            )
            entry.announcement = .nobody
            self = .message(entry)
        case "read":
            let reader = try account(line.account, "account")
            let upTo = try required(line.upTo, "upTo")
            guard ClientMessageID(rawValue: upTo).isValid else { throw invalid("upTo '\(upTo.prefix(200))' is not a valid message id") }
            self = .read(
                reader: reader,
                conversation: try conversation(of: reader, with: line.with, "with"),
                upTo: MessageID(rawValue: upTo),
                time: try time(),
                shared: line.private != true
            )
        case "recall":
            let message = try required(line.message, "message")
            guard ClientMessageID(rawValue: message).isValid else {
                throw invalid("message '\(message.prefix(200))' is not a valid message id")
            }
            self = .recall(id: try entryID(line.id), message: MessageID(rawValue: message), by: try account(line.by, "by"), time: try time())
        default:
            throw invalid("kind must be account, group, message, read or recall, not '\(line.kind.prefix(40))'")
        }
    }

    /// A decoding error in a sentence: which field, and what was wrong with it.
    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not JSON" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, _): return "it has no \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return path(context).isEmpty ? "not a JSON object" : "\(path(context)) has the wrong type"
        case .dataCorrupted(let context):
            return path(context).isEmpty ? "not JSON" : "\(path(context)) is malformed"
        @unknown default: return "not JSON"
        }
    }
}
