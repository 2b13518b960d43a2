// Courier — Apache-2.0
import CourierWire

/// The third party of the differential test: the receipt, read and recall rules written again from
/// SPEC §2–§6 and docs/protocol.md over plain collections, sharing no code with the server or its stores.
///
/// Where a store keeps positions (a watermark plus the seqs read above it, compacted) and counters (a message's
/// audience and read count, moved by each read and leave), the model keeps sets — every seq an account has read,
/// every membership with its reads — and derives each answer from them when asked. So the stores' bookkeeping is
/// checked against its meaning: an unread count is the messages of others not in the reader's set; a message's
/// readers are the members of its audience whose shared set holds it, plus those who read it and left.
///
/// It predicts, for each step, the facts a client relies on ("facts" below): the ack or the error code; a send's
/// seq and quote; a read's watermark, seqs read above it and unread count; a delivery watermark; a group change's or
/// recall's seq; unread counts; receipt counts; the accounts in a receipt list and its total; and history as each
/// account sees it (bodies, tombstones, the one-way sender's copy, quotes). The JSON itself and the events are
/// compared between the two backends only.
struct DifferentialModel {
    struct Entry {
        enum Kind {
            case chat(clientID: String, body: String, type: String?, asks: Bool)
            case change(String)
            case recall(target: String, mode: String, by: AccountID)
        }
        let seq: Int64
        let sender: AccountID
        let time: Int64
        let kind: Kind
        var quote: String?
        var replyTo: Int64?
        var recalled = false
        /// A one-way recall's copy for its sender (body and quote as they were when recalled).
        var senderCopy: (body: String, quote: String?)?

        /// A chat message that was not recalled counts as unread for the others; nothing else does (SPEC §6: a
        /// recall notice only if asked, which these programs never do).
        var countsUnread: Bool {
            if case .chat = kind { return !recalled }
            return false
        }
        var asks: Bool {
            if case .chat(_, _, _, let asks) = kind { return asks }
            return false
        }
        var clientID: String? {
            if case .chat(let id, _, _, _) = kind { return id }
            return nil
        }
    }

    struct Conversation {
        var entries: [Entry] = []
        /// Everything each account has read (its own position) and shared (what others may learn of).
        var own: [AccountID: Set<Int64>] = [:]
        var shared: [AccountID: Set<Int64>] = [:]
        /// The highest seq each account acknowledged delivery of.
        var delivered: [AccountID: Int64] = [:]
        var last: Int64 { Int64(entries.count) }
    }

    /// A membership of the group that ended, and what it had shared reading by then.
    struct Former {
        let account: AccountID
        let joined: Int64
        let left: Int64
        let shared: Set<Int64>
    }

    struct Member {
        var role: MemberRole
        let joined: Int64
    }

    struct Known {
        let clientID: String
        let seq: Int64
        let time: Int64
        let asked: Bool
    }

    var conversations: [ConversationID: Conversation] = [:]
    var members: [AccountID: Member] = [:]
    var former: [Former] = []
    /// Per account: the account-wide setting and per-conversation ones (SPEC §4 privacy; default on).
    var settings: [AccountID: (global: Bool, conversations: [ConversationID: Bool])] = [:]
    var known: [ConversationID: [Known]] = [:]
    /// Recall notices by (requester, recalled message): a repeat answers the first (idempotent on its client id).
    var recalls: [String: Int64] = [:]
    var clientIDs = 0
    var now: Int64

    /// The windows the servers are configured with: a sender's own recall, and an owner's or admin's of others'.
    static let recallWindow: Int64 = 20_000
    static let adminRecallWindow: Int64 = 8_000
    static let group = DifferentialRun.group

    init(now: Int64) { self.now = now }

    // MARK: Steps

    /// `a` creates the group with `b` and `c`.
    mutating func create() -> String {
        let seq = append(to: Self.group, sender: "a", kind: .change("created [b, c]"))
        for account: AccountID in ["a", "b", "c"] { join(account, at: seq, role: account == "a" ? .owner : .member) }
        return "entry \(seq)"
    }

    /// The facts `step` answers, the model's state moved as the server's should be.
    mutating func apply(_ step: DifferentialStep, at time: Int64) -> String {
        now = time
        let (account, choice, conversation, other) = (step.account, step.choice, step.conversation, step.other)
        let picked = message(in: conversation, pick: choice / 7)
        switch step.kind {
        case .send, .sendAsking:
            clientIDs += 1
            return send(
                "m\(clientIDs)",
                by: account,
                in: conversation,
                type: [nil, "image", "text", "app.card", nil][choice % 5],
                replyTo: choice % 3 == 0 ? picked : nil,
                asking: step.kind == .sendAsking
            )
        case .deliver:
            return deliver(by: account, in: conversation, seq: picked?.seq ?? 1)
        case .readMessages:
            let seqs = Set([picked, message(in: conversation, pick: choice / 11)].compactMap { $0?.seq })
            return read(by: account, in: conversation, .seqs(seqs), isPrivate: false)
        case .readSeq:
            return read(by: account, in: conversation, .upTo(picked?.seq ?? 1), isPrivate: false)
        case .readTime:
            return read(by: account, in: conversation, .time(picked?.time ?? 0), isPrivate: false)
        case .readAll:
            return read(by: account, in: conversation, .all, isPrivate: false)
        case .readPrivately:
            return read(by: account, in: conversation, .all, isPrivate: true)
        case .settings:
            let scope: ConversationID? = choice % 3 == 0 ? nil : conversation
            if let scope, !isMember(account, of: scope) { return "error conversation.notAMember" }
            var current = settings[account] ?? (true, [:])
            if let scope { current.conversations[scope] = choice % 2 == 0 } else { current.global = choice % 2 == 0 }
            settings[account] = current
            let scoped = current.conversations.sorted { $0.key.rawValue < $1.key.rawValue }
                .map { "\($0.key)=\($0.value)" }
            return "settings \(current.global) \(scoped)"
        case .add, .remove, .setRole, .transfer, .leave:
            clientIDs += 1
            return changeGroup(step.kind, by: account, other: other, role: choice % 2 == 0 ? .admin : .member)
        case .recall:
            guard let picked else { return "no message" }
            return recall(picked.seq, in: conversation, by: account, mode: choice % 2 == 0 ? "twoWay" : "oneWay")
        case .appRecall:
            guard let picked else { return "no message" }
            return recall(picked.seq, in: conversation, by: nil, mode: choice % 2 == 0 ? "twoWay" : "oneWay")
        case .counts:
            let asked = asking()
            guard !asked.isEmpty else { return "no message" }
            return counts(of: asked.suffix(100), by: account)
        case .list:
            let asked = asking()
            guard !asked.isEmpty else { return "no message" }
            let kinds: [ReceiptListKind] = [.read, .unread, .delivered]
            return list(kinds[choice % 3], of: asked[(choice / 3) % asked.count], by: account)
        case .unread:
            return unread(of: account)
        case .history:
            return history(of: conversation, for: account, limit: 5)
        case .sync:
            return "synced"
        }
    }

    /// What each account asks at the end (`DifferentialRun.finalChecks`).
    func finalChecks() -> [String] {
        var facts: [String] = []
        let asked = asking()
        for account in DifferentialRun.accounts {
            facts.append(unread(of: account))
            for conversation in DifferentialRun.conversations {
                facts.append(history(of: conversation, for: account, limit: 100))
            }
            facts.append(sync(for: account))
            if !asked.isEmpty { facts.append(counts(of: asked.suffix(100), by: account)) }
        }
        return facts
    }

    // MARK: State

    @discardableResult
    mutating func append(
        to conversation: ConversationID,
        sender: AccountID,
        kind: Entry.Kind,
        quote: String? = nil,
        replyTo: Int64? = nil
    ) -> Int64 {
        var state = conversations[conversation] ?? Conversation()
        let seq = state.last + 1
        state.entries.append(Entry(seq: seq, sender: sender, time: now, kind: kind, quote: quote, replyTo: replyTo))
        conversations[conversation] = state
        return seq
    }

    /// A member starts having read (and received) everything up to the entry that added it.
    mutating func join(_ account: AccountID, at seq: Int64, role: MemberRole) {
        members[account] = Member(role: role, joined: seq)
        var state = conversations[Self.group]!
        state.own[account] = Set(1...seq)
        state.shared[account] = Set(1...seq)
        state.delivered[account] = seq
        conversations[Self.group] = state
    }

    mutating func leave(_ account: AccountID, at seq: Int64) {
        guard let member = members.removeValue(forKey: account) else { return }
        var state = conversations[Self.group]!
        former.append(Former(account: account, joined: member.joined, left: seq, shared: state.shared[account] ?? []))
        state.own[account] = nil
        state.shared[account] = nil
        state.delivered[account] = nil
        conversations[Self.group] = state
    }

    func isMember(_ account: AccountID, of conversation: ConversationID) -> Bool {
        if let (one, two) = conversation.directMembers { return account == one || account == two }
        return members[account] != nil
    }

    func entry(_ seq: Int64, in conversation: ConversationID) -> Entry {
        conversations[conversation]!.entries[Int(seq) - 1]
    }

    func bodyOf(_ entry: Entry) -> String {
        if case .chat(_, let body, _, _) = entry.kind { return body }
        return ""
    }

    /// The entries that never count as unread for `account`: its own, and those that do not count (ADR 0038).
    func neverUnread(for account: AccountID, in state: Conversation) -> Set<Int64> {
        Set(state.entries.filter { $0.sender == account || !$0.countsUnread }.map(\.seq))
    }

    func asking() -> [Known] { (known[Self.group] ?? []).filter(\.asked) }

    func message(in conversation: ConversationID, pick: Int) -> Known? {
        let messages = known[conversation] ?? []
        return messages.isEmpty ? nil : messages[pick % messages.count]
    }

    /// The owner manages anyone but the owner; admins manage ordinary members.
    static func canManage(_ actor: MemberRole, _ target: MemberRole) -> Bool {
        switch actor {
        case .owner: target != .owner
        case .admin: target == .member
        default: false
        }
    }
}
