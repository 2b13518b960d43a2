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
        // In a group the writing transaction checks the reader's membership (the hot path of a group's acks saves a
        // read). A request refused before it gets there is answered as the check would have answered first.
        guard request.conversation.groupID != nil else {
            try await access.check(device.account, in: request.conversation)
            return try await checkedRead(request, from: device)
        }
        do {
            return try await checkedRead(request, from: device)
        } catch where error.code != .conversationNotAMember && error.code != .groupNotFound {
            try await access.check(device.account, in: request.conversation)
            throw error
        }
    }

    /// A read whose membership is checked, before (a direct conversation) or in its writing transaction (a group).
    private func checkedRead(
        _ request: ReadRequest,
        from device: DeviceContext
    ) async throws(RequestError) -> ServiceResult<ReadState> {
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
        let isShared = try await sharesRead(of: device.account, in: request.conversation, isPrivate: isPrivate)
        let stored: ResolvedRead.Target
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
                ResolvedRead(
                    reader: device.account,
                    conversation: request.conversation,
                    target: stored,
                    isShared: isShared,
                    time: time,
                    content: request.content
                )
            )
        } catch {
            throw await access.refusal(error, in: request.conversation)
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
        } else if let shared = change.shared, let (first, second) = request.conversation.directMembers {
            result.publications.append(Self.readPublication(shared, in: request.conversation, members: [first, second]))
        }
        return result
    }

    /// A direct conversation's `read` event: the reader's shared position, to the other member.
    static func readPublication(
        _ shared: MemberReceipts,
        in conversation: ConversationID,
        members: [AccountID]
    ) -> Publication {
        let event = ReadEvent(
            conversation: conversation,
            account: shared.account,
            watermark: shared.read,
            readSeqs: shared.readSeqs
        )
        let others = members.filter { $0 != shared.account }
        return Publication(event: .read(event), recipients: others, excluded: nil)
    }

    /// Whether the peers of `account` learn of its read: the server's policy, then the account's settings.
    private func sharesRead(
        of account: AccountID,
        in conversation: ConversationID,
        isPrivate: Bool
    ) async throws(RequestError) -> Bool {
        switch policy {
        case .alwaysOn: return true
        case .alwaysOff: return false
        default: return isPrivate ? false : try await settings(of: account).sharesReads(in: conversation)
        }
    }

    /// The app's backend reads a conversation up to `seq` for up to ``maxAppReaders`` accounts at once (REST), each
    /// as the account's own `read` with that `seq` would: its unread count drops on all its devices, and its peers
    /// learn of it as the account's read-receipt settings allow. One transaction: all of the reads or none.
    ///
    /// - Throws: `request.invalidArgument` for no, too many or repeated accounts or a negative seq;
    ///   `conversation.notAMember` naming the first account not in the conversation; what a `read` throws.
    func readForApp(_ request: AppReadRequest) async throws(RequestError) -> [Publication] {
        guard (1...Self.maxAppReaders).contains(request.accounts.count),
            Set(request.accounts).count == request.accounts.count
        else {
            throw RequestError(.invalidArgument, "Name 1–\(Self.maxAppReaders) different accounts per request.")
        }
        guard request.seq >= .zero else { throw RequestError(.invalidArgument, "seq must be >= 0.") }
        if let outsider = try await access.firstOutsider(among: request.accounts, in: request.conversation) {
            throw RequestError(
                .conversationNotAMember,
                "'\(outsider.rawValue.prefix(200))' is not a member of conversation '\(request.conversation)'."
            )
        }
        var stored: [AccountID: StoredReadReceiptSettings] = [:]
        if policy == .userChoice {
            do {
                stored = try await store.readReceiptSettings(of: request.accounts, in: request.conversation)
            } catch {
                throw RequestError(error)
            }
        }
        let time = now()
        let marks = request.accounts.map { account in
            let settings = stored[account] ?? StoredReadReceiptSettings(sendReadReceipts: true, conversations: [:])
            return ResolvedRead(
                reader: account,
                conversation: request.conversation,
                target: .upTo(request.seq),
                isShared: ReadReceiptSettings(
                    policy: policy,
                    sendReadReceipts: settings.sendReadReceipts,
                    conversations: settings.conversations
                ).sharesReads(in: request.conversation),
                time: time
            )
        }
        let changes: [ReadChange]
        do { changes = try await store.markReads(marks) } catch { throw RequestError(error) }
        var publications: [Publication] = []
        var groupReads: [(reader: AccountID, receipts: [GroupReceiptChange])] = []
        for (mark, change) in zip(marks, changes) {
            if change.ownChanged {
                let event = ReadStateEvent(state: change.own, cause: .conversation)
                publications.append(Publication(event: .readState(event), recipients: [mark.reader], excluded: nil))
            }
            if request.conversation.kind == .group {
                groupReads.append((mark.reader, change.receipts))
            } else if let shared = change.shared, let (first, second) = request.conversation.directMembers {
                publications.append(Self.readPublication(shared, in: request.conversation, members: [first, second]))
            }
        }
        return publications
            + Self.receiptPublications(groupReads, in: request.conversation, at: time, content: nil)
    }

    /// Most accounts in one ``readForApp(_:)``.
    static let maxAppReaders = 1000
    /// Most reader entries in one `groupReceipts` event built from several reads (a message's update is never split).
    static let maxReadersPerEvent = 1000

    /// One `groupReceipts` event per sender whose messages the read newly covers.
    static func receiptPublications(
        _ receipts: [GroupReceiptChange],
        in group: ConversationID,
        reader: AccountID,
        at time: Timestamp,
        content: (text: String, acked: Set<Seq>)?
    ) -> [Publication] {
        receiptPublications([(reader, receipts)], in: group, at: time, content: content)
    }

    /// The `groupReceipts` events of several readers' reads made at one time: per sender, one update per message
    /// naming every new reader with the message's counts after all of the reads; events of at most
    /// ``maxReadersPerEvent`` reader entries.
    static func receiptPublications(
        _ reads: [(reader: AccountID, receipts: [GroupReceiptChange])],
        in group: ConversationID,
        at time: Timestamp,
        content: (text: String, acked: Set<Seq>)?
    ) -> [Publication] {
        var merges: [AccountID: GroupReceiptMerge] = [:]
        for (reader, receipts) in reads {
            for receipt in receipts {
                let tally = receipt.tally
                merges[tally.sender, default: GroupReceiptMerge()].withMessage(tally.messageID, seq: receipt.seq) {
                    message in
                    message.readers[reader] = time
                    // The note goes with the messages the ack named (it is kept for those only).
                    if let content, content.acked.contains(receipt.seq) { message.contents[reader] = content.text }
                    message.count(read: tally.readCount, unread: tally.unreadCount)
                }
            }
        }
        var publications: [Publication] = []
        for (sender, merge) in merges {
            var updates: [GroupReceiptUpdate] = []
            var readers = 0
            func flush() {
                guard !updates.isEmpty else { return }
                let event = GroupReceiptsEvent(conversation: group, updates: updates)
                publications.append(Publication(event: .groupReceipts(event), recipients: [sender], excluded: nil))
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
        return publications
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
            try await access.check(device.account, in: conversation)
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

/// `POST /v1/conversations/{id}/reads`: the app's backend reads a conversation for several accounts.
struct AppReadRequest: Sendable {
    let conversation: ConversationID
    let accounts: [AccountID]
    let seq: Seq
}
