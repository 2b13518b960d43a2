// Courier — Apache-2.0

public import CourierWire

/// Who receives an event, as a change says it: accounts it names, or the members of a group at the version an entry
/// was appended under (ADR 0023), which the server (`ConversationAccess.publications(of:excluding:)`) reads — the one audience
/// rule, used by the node that committed the change and by every other node.
public enum Audience: Hashable, Sendable {
    case accounts([AccountID])
    /// The members of `group` at membership version `version` (`nil`: the group's first entry), as the entry at
    /// `seq` was appended, and besides them `named` (a membership change's accounts and its sender).
    case members(of: ConversationID, version: Seq?, entry: Seq, named: [AccountID])
    /// The account and its contacts: every account it shares a conversation with now (a direct one, or a group).
    case contacts(of: AccountID)
}

/// A device event and its audience, derived from a change.
public struct ChangeEvent: Hashable, Sendable {
    public let event: ServerEvent
    public let audience: Audience

    public init(event: ServerEvent, audience: Audience) {
        self.event = event
        self.audience = audience
    }
}

extension Change {
    /// Most reader entries in one `groupReceipts` event built from several reads (a message's update is never split).
    public static let maxReadersPerEvent = 1000

    /// The device events of `changes` and who gets each, without I/O: an entry to its audience; a moved
    /// delivery watermark, or a direct read's shared receipts, to the other member of a direct conversation (a group's
    /// deliveries and reads are asked for, not pushed to every member); a reader's own position to its account; a
    /// group read's newly counted messages to their senders, one `groupReceipts` event per sender however many reads
    /// `changes` holds (the app's batch reads); a view to its account.
    public static func events(of changes: [Change]) -> [ChangeEvent] {
        var events: [ChangeEvent] = []
        var groupReads: [ConversationID: [Read]] = [:]
        var groupOrder: [ConversationID] = []
        for change in changes {
            switch change {
            case .appended(let entry, let membershipSeq, _):
                let event = ServerEvent.message(MessageEvent(message: entry))
                events.append(ChangeEvent(event: event, audience: audience(of: entry, membershipSeq: membershipSeq)))
            case .delivered(let conversation, let account, let watermark, _):
                guard let (first, second) = conversation.directMembers else { continue }
                let event = DeliveredEvent(conversation: conversation, account: account, watermark: watermark)
                events.append(ChangeEvent(event: .delivered(event), audience: .accounts(others(of: account, first, second))))
            case .read(let read):
                if let own = read.own {
                    let event = ReadStateEvent(state: own, cause: read.cause)
                    events.append(ChangeEvent(event: .readState(event), audience: .accounts([read.reader])))
                }
                if let (first, second) = read.conversation.directMembers {
                    guard let shared = read.shared else { continue }
                    let event = ReadEvent(
                        conversation: read.conversation,
                        account: shared.account,
                        watermark: shared.read,
                        readSeqs: shared.readSeqs
                    )
                    events.append(ChangeEvent(event: .read(event), audience: .accounts(others(of: read.reader, first, second))))
                } else if !read.receipts.isEmpty {
                    if groupReads[read.conversation] == nil { groupOrder.append(read.conversation) }
                    groupReads[read.conversation, default: []].append(read)
                }
            case .viewChanged(let conversation, let account, let view):
                let event = ViewEvent(conversation: conversation, view: view)
                events.append(ChangeEvent(event: .view(event), audience: .accounts([account])))
            case .profileChanged(let profile):
                events.append(ChangeEvent(event: .accountProfile(profile), audience: .contacts(of: profile.account)))
            case .reacted(let event, _, let version):
                // The members now: the membership the reaction was checked against.
                let audience: Audience =
                    if let (first, second) = event.conversation.directMembers { .accounts([first, second]) }
                    else { .members(of: event.conversation, version: version, entry: Seq(.max), named: []) }
                events.append(ChangeEvent(event: .reaction(event), audience: audience))
            case .accountChanged, .deviceKicked:
                continue
            }
        }
        for group in groupOrder { events += receiptEvents(of: groupReads[group] ?? [], in: group) }
        return events
    }

    /// A direct conversation's entry goes to its two members; a group's to its members when it was appended (SPEC
    /// §5), and to the accounts a membership change names and its sender (those added and those removed see it too;
    /// a group's creator is not a member before its first entry).
    private static func audience(of entry: WireMessage, membershipSeq: Seq?) -> Audience {
        if let (first, second) = entry.conversation.directMembers { return .accounts([first, second]) }
        let named = entry.group.map { $0.accounts + [entry.sender] } ?? []
        return .members(of: entry.conversation, version: membershipSeq, entry: entry.seq, named: named)
    }

    private static func others(of account: AccountID, _ first: AccountID, _ second: AccountID) -> [AccountID] {
        [first, second].filter { $0 != account }
    }

    /// The `groupReceipts` events of several reads of one group: per sender, one update per message naming every
    /// new reader with the message's counts after all of the reads; events of at most ``maxReadersPerEvent`` reader
    /// entries.
    private static func receiptEvents(of reads: [Read], in group: ConversationID) -> [ChangeEvent] {
        var merges: [AccountID: GroupReceiptMerge] = [:]
        var senders: [AccountID] = []
        for read in reads {
            let noted = Set(read.noted)
            for receipt in read.receipts {
                let tally = receipt.tally
                if merges[tally.sender] == nil { senders.append(tally.sender) }
                merges[tally.sender, default: GroupReceiptMerge()].withMessage(tally.messageID, seq: receipt.seq) {
                    message in
                    message.readers[read.reader] = read.time
                    // The note goes with the messages the ack named (it is kept for those only).
                    if let note = read.note, noted.contains(receipt.seq) { message.contents[read.reader] = note }
                    message.count(read: tally.readCount, unread: tally.unreadCount)
                }
            }
        }
        var events: [ChangeEvent] = []
        for sender in senders {
            guard let merge = merges[sender] else { continue }
            var updates: [GroupReceiptUpdate] = []
            var readers = 0
            func flush() {
                guard !updates.isEmpty else { return }
                let event = GroupReceiptsEvent(conversation: group, updates: updates)
                events.append(ChangeEvent(event: .groupReceipts(event), audience: .accounts([sender])))
                updates = []
                readers = 0
            }
            for message in merge.sorted {
                if readers > 0, readers + message.readers.count > maxReadersPerEvent { flush() }
                updates.append(message.update)
                readers += message.readers.count
            }
            flush()
        }
        return events
    }
}
