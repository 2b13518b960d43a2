// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire

/// Read receipts, unread counts and read privacy (SPEC §4). Order: validate → decide who may learn of the read →
/// persist (one transaction) → ack the reader's own state → tell the reader's other devices and, when shared, the
/// other members.
struct ReadService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let policy: ReadReceiptPolicy
    let now: @Sendable () -> Timestamp
    /// Most UTF-8 bytes of an ack's `content`.
    static let maxContentBytes = 256
    /// Most message ids in one `read`.
    static let maxMessageIDs = 100

    func read(_ request: ReadRequest, from device: DeviceContext) async throws(RequestError) -> ServiceResult<ReadState>
    {
        let members = try await access.members(of: request.conversation, caller: device.account)
        guard let target = request.target else {
            throw RequestError(.invalidArgument, "Give exactly one of messageIds, seq, time and all (true).")
        }
        if let content = request.content {
            guard case .messages = target, content.utf8.count <= Self.maxContentBytes else {
                throw RequestError(
                    .invalidArgument,
                    "content goes with messageIds and has at most \(Self.maxContentBytes) bytes."
                )
            }
        }
        let isPrivate = request.isPrivate ?? false
        if isPrivate, policy == .alwaysOn {
            throw RequestError(.receiptFixedByPolicy, "This server shares every read: private reads are not allowed.")
        }
        let isShared: Bool
        switch policy {
        case .alwaysOn: isShared = true
        case .alwaysOff: isShared = false
        default:
            if isPrivate {
                isShared = false
            } else {
                isShared = try await settings(of: device.account).sharesReads(in: request.conversation)
            }
        }
        let stored: ReadMark.Target
        switch target {
        case .messages(let ids):
            guard (1...Self.maxMessageIDs).contains(ids.count) else {
                throw RequestError(.invalidArgument, "messageIds must name 1–\(Self.maxMessageIDs) messages.")
            }
            var seqs: [Seq] = []
            for id in ids {
                let message = try await MessageLookup.message(id, in: request.conversation, store: store)
                // Your own messages are never unread: reading them is a no-op.
                if message.sender != device.account { seqs.append(message.seq) }
            }
            stored = .seqs(seqs)
        case .upTo(let seq):
            guard seq >= .zero else { throw RequestError(.invalidArgument, "seq must be >= 0.") }
            stored = .upTo(seq)
        case .upToTime(let time):
            guard time >= .zero else { throw RequestError(.invalidArgument, "time must be >= 0.") }
            stored = .upToTime(time)
        case .all:
            stored = .all
        }
        let change: ReadChange
        let time = now()
        do {
            change = try await store.markRead(
                ReadMark(
                    reader: device.account,
                    conversation: request.conversation,
                    target: stored,
                    isShared: isShared,
                    time: time,
                    content: request.content
                )
            )
        } catch {
            throw RequestError(error)
        }
        var result = ServiceResult(ack: change.own)
        if change.ownChanged {
            let event = ReadStateEvent(state: change.own, cause: target.cause)
            result.publications.append(
                Publication(event: .readState(event), recipients: [device.account], excluded: device.connection)
            )
        }
        if request.conversation.kind == .group {
            // A group read is not pushed to every member: the senders of the messages it covers hear of it.
            var acked: Set<Seq> = []
            if case .seqs(let seqs) = stored { acked = Set(seqs) }
            result.publications += Self.receiptPublications(
                change.receipts,
                in: request.conversation,
                reader: device.account,
                at: time,
                content: request.content.map { (text: $0, acked: acked) }
            )
        } else if let shared = change.shared {
            let event = ReadEvent(
                conversation: request.conversation,
                account: device.account,
                watermark: shared.read,
                readSeqs: shared.readSeqs
            )
            let others = members.filter { $0 != device.account }
            result.publications.append(Publication(event: .read(event), recipients: others, excluded: nil))
        }
        return result
    }

    /// One `groupReceipts` event per sender whose messages the read newly covers.
    static func receiptPublications(
        _ receipts: [GroupReceiptChange],
        in group: ConversationID,
        reader: AccountID,
        at time: Timestamp,
        content: (text: String, acked: Set<Seq>)?
    ) -> [Publication] {
        guard !receipts.isEmpty else { return [] }
        return Dictionary(grouping: receipts, by: \.tally.sender).map { sender, receipts in
            let updates = receipts.map { receipt in
                GroupReceiptUpdate(
                    messageID: receipt.tally.messageID,
                    seq: receipt.seq,
                    readers: [reader: time],
                    // The note goes with the messages the ack named (it is kept for those only).
                    contents: content.flatMap { $0.acked.contains(receipt.seq) ? [reader: $0.text] : nil },
                    readCount: receipt.tally.readCount,
                    unreadCount: receipt.tally.unreadCount
                )
            }
            let event = GroupReceiptsEvent(conversation: group, updates: updates)
            return Publication(event: .groupReceipts(event), recipients: [sender], excluded: nil)
        }
    }

    func unread(from device: DeviceContext) async throws(RequestError) -> UnreadAck {
        do {
            let counts = try await store.unreadCounts(of: device.account)
            return UnreadAck(conversations: counts, total: counts.values.reduce(0, +))
        } catch {
            throw RequestError(error)
        }
    }

    func settings(
        _ request: ReadReceiptSettingsRequest,
        from device: DeviceContext
    ) async throws(RequestError) -> ReadReceiptSettings {
        if let conversation = request.conversation {
            _ = try await access.members(of: conversation, caller: device.account)
        }
        if let value = request.sendReadReceipts {
            guard policy == .userChoice else {
                throw RequestError(
                    .receiptFixedByPolicy,
                    "This server's read-receipt policy is \(policy): accounts cannot change it."
                )
            }
            do {
                try await store.setSendReadReceipts(value, for: device.account, in: request.conversation)
            } catch {
                throw RequestError(error)
            }
        }
        return try await settings(of: device.account)
    }

    private func settings(of account: AccountID) async throws(RequestError) -> ReadReceiptSettings {
        do {
            let stored = try await store.readReceiptSettings(of: account)
            return ReadReceiptSettings(
                policy: policy,
                sendReadReceipts: stored.sendReadReceipts,
                conversations: stored.conversations
            )
        } catch {
            throw RequestError(error)
        }
    }
}
