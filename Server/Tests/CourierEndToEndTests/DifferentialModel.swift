// Courier — Apache-2.0
import CourierWire

/// The third party of the differential test (issue 17): the receipt, read and recall rules written again from
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

    static let recallWindow: Int64 = 120_000
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
        let account = DifferentialRun.accounts[step.actor]
        let choice = step.choice
        let mine = DifferentialRun.conversations.filter { conversation in
            guard let (one, two) = conversation.directMembers else { return true }
            return one == account || two == account
        }
        let conversation = mine[choice % mine.count]
        let others = DifferentialRun.accounts.filter { $0 != account }
        let other = others[choice % others.count]
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
            facts.append("synced")
            if !asked.isEmpty { facts.append(counts(of: asked.suffix(100), by: account)) }
        }
        return facts
    }

    // MARK: Rules

    mutating func send(
        _ clientID: String,
        by account: AccountID,
        in conversation: ConversationID,
        type: String?,
        replyTo: Known?,
        asking: Bool
    ) -> String {
        guard isMember(account, of: conversation) else { return "error conversation.notAMember" }
        // Text travels as no type.
        let type = type == "text" ? nil : type
        var quote: String?
        if let replyTo {
            let original = entry(replyTo.seq, in: conversation)
            guard !original.recalled else { return "error message.notFound" }
            // Only text is quoted.
            if case .chat(_, let body, nil, _) = original.kind { quote = String(body.prefix(120)) }
        }
        let asks = asking && conversation.kind == .group
        let seq = append(
            to: conversation,
            sender: account,
            kind: .chat(clientID: clientID, body: "body \(clientID)", type: type, asks: asks),
            quote: quote,
            replyTo: replyTo?.seq
        )
        known[conversation, default: []].append(Known(clientID: clientID, seq: seq, time: now, asked: asks))
        return "sent \(seq) quote \(quote ?? "-")"
    }

    mutating func deliver(by account: AccountID, in conversation: ConversationID, seq: Int64) -> String {
        guard isMember(account, of: conversation) else { return "error conversation.notAMember" }
        guard var state = conversations[conversation] else { return "error conversation.notFound" }
        guard seq <= state.last else { return "error receipt.beyondLastMessage" }
        state.delivered[account] = max(state.delivered[account] ?? 0, seq)
        conversations[conversation] = state
        return "delivered \(delivered(account, in: conversation))"
    }

    enum ReadTarget {
        case seqs(Set<Int64>)
        case upTo(Int64)
        case time(Int64)
        case all
    }

    mutating func read(
        by account: AccountID,
        in conversation: ConversationID,
        _ target: ReadTarget,
        isPrivate: Bool
    ) -> String {
        guard isMember(account, of: conversation) else { return "error conversation.notAMember" }
        if case .seqs(let seqs) = target, seqs.isEmpty { return "error request.invalidArgument" }
        guard var state = conversations[conversation] else { return "error conversation.notFound" }
        let setting = settings[account]
        let shares = !isPrivate && (setting?.conversations[conversation] ?? setting?.global ?? true)
        // What the read covers. Naming the newest entry reads everything (SPEC §4); your own messages are never
        // unread, so naming them reads nothing.
        var covered: Set<Int64>
        switch target {
        case .seqs(let seqs):
            let others = seqs.filter { state.entries[Int($0) - 1].sender != account }
            covered = others.contains(state.last) ? Set(1...state.last) : others
        case .upTo(let seq):
            guard seq <= state.last else { return "error receipt.beyondLastMessage" }
            covered = seq > 0 ? Set(1...seq) : []
        case .time(let time):
            let seq = state.entries.last { $0.time <= time }?.seq ?? 0
            covered = seq > 0 ? Set(1...seq) : []
        case .all:
            covered = Set(1...state.last)
        }
        state.own[account, default: []].formUnion(covered)
        if shares { state.shared[account, default: []].formUnion(covered) }
        conversations[conversation] = state
        let own = state.own[account] ?? []
        let watermark = Self.watermark(of: own, skipping: ownSeqs(of: account, in: state))
        let above = own.filter { $0 > watermark }.sorted()
        return "read \(watermark) \(above) unread \(unreadCount(of: account, in: conversation) ?? 0)"
    }

    mutating func changeGroup(
        _ kind: DifferentialStep.Kind,
        by account: AccountID,
        other: AccountID,
        role: MemberRole
    ) -> String {
        guard let actor = members[account] else { return "error conversation.notAMember" }
        let target = members[other]
        let description: String
        switch kind {
        case .add:
            guard actor.role != .member else { return "error group.notPermitted" }
            guard target == nil else { return "error group.alreadyMember" }
            description = "added [\(other)]"
        case .remove:
            guard let target else { return "error group.notAMember" }
            guard Self.canManage(actor.role, target.role) else { return "error group.notPermitted" }
            description = "removed [\(other)]"
        case .leave:
            guard actor.role != .owner else { return "error group.ownerCannotLeave" }
            description = "left [\(account)]"
        case .setRole:
            guard actor.role == .owner else { return "error group.notPermitted" }
            guard let target else { return "error group.notAMember" }
            guard target.role != .owner else { return "error group.notPermitted" }
            description = "roleChanged [\(other)] \(role.rawValue)"
        default:  // transfer
            guard actor.role == .owner else { return "error group.notPermitted" }
            guard target != nil else { return "error group.notAMember" }
            description = "ownerTransferred [\(other)]"
        }
        let seq = append(to: Self.group, sender: account, kind: .change(description))
        switch kind {
        case .add: join(other, at: seq, role: .member)
        case .remove: leave(other, at: seq)
        case .leave: leave(account, at: seq)
        case .setRole: members[other]?.role = role
        default:
            members[other]?.role = .owner
            members[account]?.role = .member
        }
        return "entry \(seq)"
    }

    /// - Parameter requester: `nil` for the app's backend, which recalls as the sender with no window.
    mutating func recall(_ seq: Int64, in conversation: ConversationID, by requester: AccountID?, mode: String)
        -> String
    {
        if let requester, !isMember(requester, of: conversation) { return "error conversation.notAMember" }
        let target = entry(seq, in: conversation)
        let by = requester ?? target.sender
        var window: Int64? = requester == nil ? nil : Self.recallWindow
        if target.sender != by {
            // Direct: only the sender. Group: the owner anyone's, admins ordinary members' (a sender who left
            // counts as an ordinary member).
            guard conversation.kind == .group, let role = members[by]?.role,
                Self.canManage(role, members[target.sender]?.role ?? .member)
            else { return "error recall.notPermitted" }
            window = window.map { _ in Self.recallWindow }
        }
        if let window, !target.recalled, now - target.time > window { return "error recall.windowExpired" }
        let key = "\(by) \(target.clientID ?? "")"
        if let notice = recalls[key] { return "recall \(notice) dup true" }
        guard !target.recalled else { return "error recall.alreadyRecalled" }
        var state = conversations[conversation]!
        let index = Int(seq) - 1
        if mode == "oneWay" { state.entries[index].senderCopy = (bodyOf(target), target.quote) }
        state.entries[index].recalled = true
        state.entries[index].quote = nil
        // Replies no longer quote it.
        for reply in state.entries.indices where state.entries[reply].replyTo == seq { state.entries[reply].quote = nil }
        conversations[conversation] = state
        let notice = append(
            to: conversation,
            sender: by,
            kind: .recall(target: target.clientID ?? "", mode: mode, by: by)
        )
        recalls[key] = notice
        return "recall \(notice) dup false"
    }

    func counts(of messages: some Collection<Known>, by account: AccountID) -> String {
        guard members[account] != nil else { return "error conversation.notAMember" }
        let counts = messages.map { known -> String in
            let message = entry(known.seq, in: Self.group)
            if message.recalled { return "\(known.clientID) recalled" }
            let lists = receiptLists(of: message)
            return "\(known.clientID) \(lists.read.count)/\(lists.unread.count)"
        }
        return "counts \(counts)"
    }

    func list(_ kind: ReceiptListKind, of known: Known, by account: AccountID) -> String {
        guard members[account] != nil else { return "error conversation.notAMember" }
        let message = entry(known.seq, in: Self.group)
        if message.recalled { return "list \(kind) recalled" }
        let lists = receiptLists(of: message)
        let accounts =
            switch kind {
            case .read: lists.read
            case .unread: lists.unread
            default: lists.delivered
            }
        return "list \(kind) total \(accounts.count) \(accounts.map(\.rawValue).sorted())"
    }

    func unread(of account: AccountID) -> String {
        var counts: [String] = []
        var total = 0
        for conversation in conversations.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let count = unreadCount(of: account, in: conversation), count > 0 else { continue }
            counts.append("\(conversation)=\(count)")
            total += count
        }
        return "unread \(counts) total \(total)"
    }

    /// The newest `limit` entries of the log, as `account` sees them: a group member from the entry that added it.
    func history(of conversation: ConversationID, for account: AccountID, limit: Int) -> String {
        guard isMember(account, of: conversation) else { return "error conversation.notAMember" }
        let start = conversation.kind == .group ? members[account]!.joined : 1
        let entries = (conversations[conversation]?.entries ?? []).suffix(limit).filter { $0.seq >= start }
        let lines = entries.map { entry -> String in
            switch entry.kind {
            case .chat(let clientID, _, let type, let asks):
                var text = "\(entry.seq) \(clientID)"
                if let copy = entry.senderCopy, entry.sender == account {
                    text += " \(copy.body) q=\(copy.quote ?? "-")"
                } else {
                    text += " \(entry.recalled ? "recalled" : bodyOf(entry)) q=\(entry.quote ?? "-")"
                }
                return text + " t=\(type ?? "-")\(asks ? " asks" : "")"
            case .change(let description):
                return "\(entry.seq) \(description)"
            case .recall(let target, let mode, let by):
                return "\(entry.seq) recall \(target) \(mode) by \(by)"
            }
        }
        return "history \(lines) more \((entries.first?.seq ?? 0) > start)"
    }

    // MARK: Derived answers

    /// Messages of others that count as unread and that `account` has not read; `nil` when it is not in the
    /// conversation (or the conversation has no entries yet).
    func unreadCount(of account: AccountID, in conversation: ConversationID) -> Int? {
        guard isMember(account, of: conversation), let state = conversations[conversation] else { return nil }
        let read = state.own[account] ?? []
        return state.entries.filter { $0.sender != account && $0.countsUnread && !read.contains($0.seq) }.count
    }

    /// A message's read, unread and delivered lists (SPEC §5): its audience is the members when it was sent but the
    /// sender; members who left drop out unless they had read it.
    func receiptLists(of message: Entry) -> (read: [AccountID], unread: [AccountID], delivered: [AccountID]) {
        let state = conversations[Self.group]!
        let audience = members.filter { $0.value.joined < message.seq && $0.key != message.sender }.keys
        let current = audience.filter { state.shared[$0]?.contains(message.seq) == true }
        let gone = former.filter {
            $0.joined < message.seq && $0.left > message.seq && $0.account != message.sender
                && $0.shared.contains(message.seq)
        }
        return (
            Array(current) + gone.map(\.account),
            audience.filter { state.shared[$0]?.contains(message.seq) != true },
            audience.filter { delivered($0, in: Self.group) >= message.seq }
        )
    }

    /// An account's delivery watermark: what it acknowledged, raised by what it shared reading (read implies
    /// delivered), a group member's starting at the entry that added it.
    func delivered(_ account: AccountID, in conversation: ConversationID) -> Int64 {
        guard let state = conversations[conversation] else { return 0 }
        let shared = Self.watermark(of: state.shared[account] ?? [], skipping: ownSeqs(of: account, in: state))
        return max(state.delivered[account] ?? 0, shared)
    }

    /// The highest seq up to which everything is read, stepping over the reader's own entries (never unread): the
    /// watermark a client is told.
    static func watermark(of read: Set<Int64>, skipping own: Set<Int64>) -> Int64 {
        var watermark: Int64 = 0
        var next: Int64 = 1
        while read.contains(next) || own.contains(next) {
            if read.contains(next) { watermark = next }
            next += 1
        }
        return watermark
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

    func ownSeqs(of account: AccountID, in state: Conversation) -> Set<Int64> {
        Set(state.entries.filter { $0.sender == account }.map(\.seq))
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
