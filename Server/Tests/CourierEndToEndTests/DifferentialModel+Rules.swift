// Courier — Apache-2.0
import CourierWire

extension DifferentialModel {
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
        // What the read covers. A message read ack reads exactly those messages, whichever is the newest (SPEC §4,
        // ADR 0038); your own messages are never unread, so naming them reads nothing.
        var covered: Set<Int64>
        switch target {
        case .seqs(let seqs):
            covered = Set(seqs.filter { state.entries[Int($0) - 1].sender != account })
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
        let watermark = Self.watermark(of: own, skipping: neverUnread(for: account, in: state))
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
            window = window.map { _ in Self.adminRecallWindow }
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

    /// A sync from scratch: every conversation the account is in, with its entries from the first it may see.
    func sync(for account: AccountID) -> String {
        let states = conversations.keys.sorted { $0.rawValue < $1.rawValue }.compactMap { id -> String? in
            guard isMember(account, of: id), let state = conversations[id] else { return nil }
            var group = ""
            var start: Int64 = 1
            if id.kind == .group, let member = members[account] {
                group = " \(member.role.rawValue) joined \(member.joined) of \(members.count)"
                start = member.joined
            }
            let seqs = state.entries.map(\.seq).filter { $0 >= start }
            return "\(id) last \(state.last) unread \(unreadCount(of: account, in: id) ?? 0)\(group) entries \(seqs)"
        }
        return "sync \(states) more false"
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
        let shared = Self.watermark(of: state.shared[account] ?? [], skipping: neverUnread(for: account, in: state))
        return max(state.delivered[account] ?? 0, shared)
    }

    /// The highest seq up to which everything is read, stepping over what is never unread for the reader (its own
    /// entries, entries that do not count): the watermark a client is told.
    static func watermark(of read: Set<Int64>, skipping own: Set<Int64>) -> Int64 {
        var watermark: Int64 = 0
        var next: Int64 = 1
        while read.contains(next) || own.contains(next) {
            if read.contains(next) { watermark = next }
            next += 1
        }
        return watermark
    }
}
