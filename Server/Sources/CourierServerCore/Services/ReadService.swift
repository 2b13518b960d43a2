// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// Read receipts, unread counts and read privacy (SPEC §4). Order: validate → decide who may learn of the read →
/// persist (one transaction) → ack the reader's own state → tell the reader's other devices and, when shared, the
/// other members.
package struct ReadService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let policy: ReadReceiptPolicy
    let now: @Sendable () -> Timestamp
    /// Most UTF-8 bytes of an ack's `content`.
    static let maxContentBytes = 256
    /// Most message ids in one `read`.
    static let maxMessageIDs = 100

    /// `place`: the read waits for `after` just before its write, once it has looked up what it names, and calls
    /// `queued` once it has its place in the store's commit order (``ReadStore/markRead(_:whenQueued:)``), so a
    /// device's next read can start before this one commits.
    package func read(
        _ request: ReadRequest,
        from device: DeviceContext,
        place: StorePlace = StorePlace()
    ) async throws(RequestError) -> ServiceResult<ReadState> {
        // In a group the writing transaction checks the reader's membership (the hot path of a group's acks saves a
        // read). A request refused before it gets there is answered as the check would have answered first.
        guard request.conversation.groupID != nil else {
            try await access.check(device.account, in: request.conversation)
            return try await checkedRead(request, from: device, place: place)
        }
        do {
            return try await checkedRead(request, from: device, place: place)
        } catch where error.code != .conversationNotAMember && error.code != .groupNotFound {
            try await access.check(device.account, in: request.conversation)
            throw error
        }
    }

    /// A read whose membership is checked, before (a direct conversation) or in its writing transaction (a group).
    private func checkedRead(
        _ request: ReadRequest,
        from device: DeviceContext,
        place: StorePlace
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
        let read = ResolvedRead(
            reader: device.account,
            conversation: request.conversation,
            target: stored,
            isShared: isShared,
            time: now(),
            note: request.content
        )
        let outcome: ReadOutcome
        do {
            await place.after?()
            outcome = try await store.markRead(read, whenQueued: place.queued)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        return ServiceResult(
            ack: outcome.own,
            publications: try await access.publications(of: outcome.change, excluding: device.connection)
        )
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
    package func readForApp(_ request: AppReadRequest) async throws(RequestError) -> [Publication] {
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
        let reads = request.accounts.map { account in
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
        let outcomes = try await storing { () throws(StorageError) in try await store.markReads(reads) }
        return try await access.publications(of: outcomes.compactMap(\.change), excluding: nil)
    }

    /// Most accounts in one ``readForApp(_:)``.
    static let maxAppReaders = 1000
    package func unread(from device: DeviceContext) async throws(RequestError) -> UnreadAck {
        return try await storing { () throws(StorageError) in
            let counts = try await store.unreadCounts(of: device.account)
            return UnreadAck(conversations: counts, total: counts.values.reduce(0, +))
        }
    }

    package func settings(
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
            try await storing { () throws(StorageError) in
                try await store.setSendReadReceipts(value, for: device.account, in: request.conversation)
            }
        }
        return try await settings(of: device.account)
    }

    private func settings(of account: AccountID) async throws(RequestError) -> ReadReceiptSettings {
        return try await storing { () throws(StorageError) in
            let stored = try await store.readReceiptSettings(of: account)
            return ReadReceiptSettings(
                policy: policy,
                sendReadReceipts: stored.sendReadReceipts,
                conversations: stored.conversations
            )
        }
    }
}

/// `POST /v1/conversations/{id}/reads`: the app's backend reads a conversation for several accounts.
package struct AppReadRequest: Sendable {
    let conversation: ConversationID
    let accounts: [AccountID]
    let seq: Seq

    package init(conversation: ConversationID, accounts: [AccountID], seq: Seq) {
        self.conversation = conversation
        self.accounts = accounts
        self.seq = seq
    }
}
