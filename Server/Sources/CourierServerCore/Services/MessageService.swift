// Courier — Apache-2.0
internal import CourierStorage
package import CourierDomain
package import CourierWire
internal import Foundation

/// The authenticated device a request comes from.
package struct DeviceContext: Sendable {
    package let account: AccountID
    package let device: DeviceID
    package let connection: ConnectionID

    package init(account: AccountID, device: DeviceID, connection: ConnectionID) {
        self.account = account
        self.device = device
        self.connection = connection
    }

    /// The app's backend acting as `account`: a device of no connection, so the account's own devices receive what
    /// it does like everyone else's.
    package static func app(acting account: AccountID) -> DeviceContext {
        DeviceContext(account: account, device: DeviceID(rawValue: "courier.rest"), connection: .none)
    }
}

/// What a service answers: the ack, and the events to publish once the ack is queued.
package struct ServiceResult<Payload: Sendable>: Sendable {
    package let ack: Payload
    package var publications: [Publication] = []
}

/// Send, sync and history. Order in every use case: validate → persist (one transaction) → ack → publish.
package struct MessageService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    package let limits: CourierServerConfiguration.Limits
    let groupReceipts: CourierServerConfiguration.GroupReceipts
    let hooks: CourierServerConfiguration.Hooks
    let now: @Sendable () -> Timestamp

    /// - Parameter whenQueued: Called once the append has its place in the store's commit order, if the store says
    ///   (``MessageStore/append(_:whenQueued:)``).
    package func send(
        _ request: SendRequest,
        from device: DeviceContext,
        whenQueued: (@Sendable () -> Void)? = nil
    ) async throws(RequestError) -> ServiceResult<SendAck> {
        try await access.check(device.account, in: request.conversation)
        let needsReadReceipt = request.needsReadReceipt == true && request.conversation.kind == .group
        if needsReadReceipt {
            try await groupReceipts.checkAsking(in: request.conversation, by: device.account, access: access)
        }
        let (type, ext) = try Self.checkedContent(
            clientID: request.clientID,
            type: request.type,
            body: request.body,
            ext: request.ext,
            limits: limits
        )
        if let replyTo = request.replyTo {
            // Which message it answers; its quote is taken by the append's transaction (``ReplyQuote``).
            let original = try await MessageLookup.message(replyTo, in: request.conversation, store: store)
            guard original.recall == nil, !original.isRecalled else {
                throw RequestError(.messageNotFound, "'\(replyTo)' was recalled or is not a message.")
            }
        }
        let draft = MessageDraft(
            id: MessageID(rawValue: .randomUUID()),
            conversation: request.conversation,
            clientID: request.clientID,
            sender: device.account,
            time: now(),
            type: type,
            body: request.body,
            replyTo: request.replyTo,
            needsReadReceipt: needsReadReceipt,
            ext: ext
        )
        await hooks.beforeWrite?(.send)
        let result: AppendOutcome
        do {
            result = try await store.append(draft, whenQueued: whenQueued)
        } catch {
            throw await access.refusal(error, in: request.conversation)
        }
        return try await access.published(result, excluding: device.connection)
    }

    /// A message's client id and content as every send checks them (an import too): its type as stored (`text` is
    /// none, so that a message reads the same whether its sender named the type or not) and its ext (an empty one is
    /// none).
    package static func checkedContent(
        clientID: ClientMessageID,
        type: String?,
        body: String,
        ext: [String: String]?,
        limits: CourierServerConfiguration.Limits
    ) throws(RequestError) -> (type: String?, ext: [String: String]?) {
        guard clientID.isValid else {
            throw RequestError(.invalidArgument, "clientId must be 1–128 characters of [A-Za-z0-9._@:-].")
        }
        guard body.utf8.count <= limits.maxBodyBytes else {
            throw RequestError(.messageBodyTooLarge, "The body exceeds \(limits.maxBodyBytes) bytes.")
        }
        let type = type == "text" ? nil : type
        if let type, !WireMessage.isValidType(type) {
            throw RequestError(.invalidArgument, "type must be 1–64 characters of [A-Za-z0-9._:-], starting with a letter.")
        }
        if let ext, !WireMessage.isValidExt(ext) {
            throw RequestError(
                .invalidArgument,
                "ext must have at most 64 keys of 1–64 characters and \(WireMessage.maxExtBytes) bytes of keys and values."
            )
        }
        return (type, ext?.isEmpty == false ? ext : nil)
    }

    package func sync(_ request: SyncRequest, from device: DeviceContext) async throws(RequestError) -> SyncAck {
        guard request.cursors.values.allSatisfy({ $0 >= .zero }), (request.limit ?? 1) > 0, (request.recent ?? 1) > 0
        else {
            throw RequestError(.invalidArgument, "Cursors must be >= 0, limit and recent > 0.")
        }
        var page = Page(messages: limits.maxPageSize, bytes: limits.maxPageBytes, requested: request.limit)
        let current = try await storing { () throws(StorageError) in try await store.changeCursor() }
        var token: SyncToken?
        if let since = request.since {
            guard let parsed = SyncToken(since), parsed.storeID == current.storeID, parsed.next <= current.stamp else {
                throw RequestError(.syncCursorInvalid, "since was not handed out by this server's database.")
            }
            token = parsed
        }
        // The cursor this sync hands out is taken before anything is read, on its first page: whatever commits later
        // carries a stamp at or above it and comes again next time. A completed sync's cursor is where the next one
        // takes changes from; a continued one carries both.
        let (next, changesSince): (Int64, Int64?) =
            switch token {
            case let token? where token.position != nil: (token.next, token.changesSince)
            case let token?: (current.stamp, token.next)
            case nil: (current.stamp, nil)
            }
        do {
            // What this sync goes through, each from where the device's log of it continues.
            var conversations: [(state: ConversationState, start: Seq)]
            if let changesSince {
                // A membership that ended starts no earlier than it began (its state's `syncFrom`), whatever the cursor.
                conversations = try await store.changedConversations(of: device.account, since: changesSince).map {
                    let floor = max($0.state.logStart, $0.state.syncFrom ?? .zero)
                    return ($0.state, max(request.cursors[$0.state.id] ?? $0.changedAfter, floor))
                }
            } else {
                conversations = try await store.conversations(of: device.account).map {
                    let state = Self.startingRecent($0, request, account: device.account)
                    return (state, max(request.cursors[state.id] ?? state.syncFrom ?? .zero, state.logStart))
                }
            }
            try await requireHeld(request.cursors, within: conversations.map(\.state))
            conversations.sort { $0.state.id.rawValue.utf8.lexicographicallyPrecedes($1.state.id.rawValue.utf8) }
            var messages: [WireMessage] = []
            var hasMore = false
            for (state, start) in conversations {
                // A continued sync resumes after the last entry its previous page carried.
                var cursor = start
                if let position = token?.position {
                    let id = state.id.rawValue.utf8
                    if id.lexicographicallyPrecedes(position.conversation.rawValue.utf8) { continue }
                    if state.id == position.conversation { cursor = max(cursor, position.seq) }
                }
                guard state.lastSeq > cursor else { continue }
                guard page.remaining > 0 else {
                    hasMore = true
                    break
                }
                // A membership that ended (ADR 0023) is synced up to the entry that ended it, and no further.
                let fetched = try await store.messages(in: state.id, after: cursor, limit: page.remaining)
                    .filter { $0.seq <= state.lastSeq }
                let taken = page.take(try await withSenderCopies(fetched, for: device.account))
                messages += taken
                if (taken.last?.seq ?? cursor) < state.lastSeq { hasMore = true }
            }
            var states = conversations.map(\.state)
            let since: SyncToken
            if hasMore, let last = messages.last {
                // A page before the last carries the states of the conversations its messages are in, no other: the
                // last page carries them all, so each state crosses the wire once per sync, not once per page.
                let paged = Set(messages.map(\.conversation))
                states = states.filter { paged.contains($0.id) }
                since = SyncToken(
                    storeID: current.storeID,
                    next: next,
                    changesSince: changesSince,
                    position: (last.conversation, last.seq)
                )
            } else {
                // Unread counts cost O(unread) each: they come once, with the page that completes the sync.
                let unread = try await store.unreadCounts(of: device.account)
                states = states.map { $0.with(unreadCount: unread[$0.id] ?? 0) }
                since = SyncToken(storeID: current.storeID, next: next, changesSince: nil, position: nil)
            }
            return SyncAck(conversations: states, messages: messages, hasMore: hasMore, since: since.text)
        } catch let error as RequestError {
            throw error
        } catch let error as StorageError {
            throw RequestError(error)
        } catch {
            throw RequestError(.internal, "\(error)")
        }
    }

    /// Refuses a sync whose device holds an entry this database never wrote: a cursor past a conversation's last seq
    /// (ADR 0044). Its history was forked, by a snapshot of the database's files put back under the server or a
    /// failover to a standby that lacked the last commits: a device that went on from it would keep entries the
    /// database no longer has, and drop the new ones that take their seqs. Conversations the sync did not list are
    /// looked up (a resumed sync lists only those that changed; a device names only those with live entries since
    /// its cursor); one the database does not have (purged) is left to the sync.
    package func requireHeld(
        _ cursors: [ConversationID: Seq],
        within listed: [ConversationState]
    ) async throws(RequestError) {
        guard !cursors.isEmpty else { return }
        let states = Dictionary(listed.map { ($0.id, $0.lastSeq) }, uniquingKeysWith: max)
        for (conversation, held) in cursors where held > .zero {
            let last: Seq?
            if let listed = states[conversation] {
                last = listed
            } else {
                do { last = try await store.conversation(conversation)?.lastSeq } catch { throw RequestError(error) }
            }
            if let last, held > last {
                throw RequestError(
                    .syncCursorInvalid,
                    "This device holds \(conversation) up to seq \(held.rawValue); the server's database ends at \(last.rawValue): it was restored. Sync again without since or cursors."
                )
            }
        }
    }

    /// `messages` as `account` sees them: its own messages recalled one-way come back as sent (SPEC §6: the
    /// sender's account keeps the message on every device, new installs included); everyone else sees the
    /// tombstone. One lookup, and only when the page holds tombstones of the caller's own messages.
    package func withSenderCopies(
        _ messages: [WireMessage],
        for account: AccountID) async throws(StorageError
    ) -> [WireMessage] {
        let own = messages.filter { $0.isRecalled && $0.sender == account }.map(\.id)
        guard !own.isEmpty else { return messages }
        let copies = try await store.senderCopies(of: own, sender: account)
        guard !copies.isEmpty else { return messages }
        return messages.map { message in
            guard let copy = copies[message.id] else { return message }
            return WireMessage(
                id: message.id,
                conversation: message.conversation,
                seq: message.seq,
                clientID: message.clientID,
                sender: message.sender,
                time: message.time,
                type: message.type,
                body: copy.body,
                replyTo: message.replyTo,
                quote: copy.quote,
                needsReadReceipt: message.needsReadReceipt,
                ext: copy.ext
            )
        }
    }

    /// A conversation the request has no cursor for, when it asks for `recent` entries only: starts at the newest
    /// `recent` entries, or at the caller's read watermark if that is lower, so every unread entry is synced and the
    /// device's unread count is exact (ADR 0009).
    package static func startingRecent(
        _ conversation: ConversationState,
        _ request: SyncRequest,
        account: AccountID
    ) -> ConversationState {
        guard let recent = request.recent, request.cursors[conversation.id] == nil else { return conversation }
        let read = conversation.receipts.first { $0.account == account }?.read.seq ?? .zero
        let floor = min(Seq(max(0, conversation.lastSeq.rawValue - Int64(recent))), read)
        return floor > conversation.logStart ? conversation.with(syncFrom: floor) : conversation
    }

    package func history(
        _ request: HistoryRequest,
        from device: DeviceContext) async throws(RequestError
    ) -> HistoryAck {
        // A group member sees the log from the entry that added it.
        let start = try await access.check(device.account, in: request.conversation)?.joinedSeq ?? Seq(1)
        guard (request.limit ?? 1) > 0, (request.before ?? .zero) >= .zero else {
            throw RequestError(.invalidArgument, "limit must be > 0 and before >= 0.")
        }
        var page = Page(messages: limits.maxPageSize, bytes: limits.maxPageBytes, requested: request.limit)
        let fetched: [WireMessage]
        do {
            fetched = try await withSenderCopies(
                try await store.messages(in: request.conversation, before: request.before, limit: page.remaining),
                for: device.account
            )
        } catch {
            throw RequestError(error)
        }
        // Keep the newest messages when the byte budget cuts the page.
        let taken = Array(page.take(fetched.filter { $0.seq >= start }.reversed()).reversed())
        return HistoryAck(messages: taken, hasMore: (taken.first?.seq ?? .zero) > start)
    }
}

/// The `since` a sync hands out (ADR 0017), opaque to clients: `v1.STORE.NEXT` once a sync completes — the stamp to
/// resume from — and `v1.STORE.NEXT.SINCE.SEQ.CONVERSATION` to continue one: the stamp it syncs changes from (`-` for
/// a full sync) and the last entry its previous page carried.
struct SyncToken {
    let storeID: String
    /// The cursor to hand out when this sync completes.
    let next: Int64
    /// Only conversations changed at or after this stamp; `nil`: every conversation (and in a completed sync's
    /// cursor, where `next` is the stamp the next sync takes changes from).
    let changesSince: Int64?
    /// Where the previous page of this sync stopped.
    let position: (conversation: ConversationID, seq: Seq)?

    init(storeID: String, next: Int64, changesSince: Int64?, position: (ConversationID, Seq)?) {
        self.storeID = storeID
        self.next = next
        self.changesSince = changesSince
        self.position = position.map { (conversation: $0.0, seq: $0.1) }
    }

    init?(_ text: String) {
        guard let cursor = CursorText(text, version: "v1") else { return nil }
        storeID = cursor.store
        next = cursor.stamp
        guard let more = cursor.more else {
            changesSince = nil
            position = nil
            return
        }
        if more.0 == "-" {
            changesSince = nil
        } else {
            guard let since = Int64(more.0), since >= 0, since <= next else { return nil }
            changesSince = since
        }
        guard let seq = Int64(more.1), seq >= 0, !more.2.isEmpty else { return nil }
        position = (ConversationID(rawValue: String(more.2)), Seq(seq))
    }

    var text: String {
        guard let position else { return "v1.\(storeID).\(next)" }
        return "v1.\(storeID).\(next).\(changesSince.map(String.init) ?? "-").\(position.seq.rawValue)."
            + position.conversation.rawValue
    }
}

/// A page budget: a number of messages and of body bytes (at least one message always fits).
struct Page {
    private(set) var remaining: Int
    private var bytes: Int

    init(messages: Int, bytes: Int, requested: Int?) {
        remaining = min(requested ?? messages, messages)
        self.bytes = bytes
    }

    mutating func take(_ messages: some Sequence<WireMessage>) -> [WireMessage] {
        var taken: [WireMessage] = []
        for message in messages {
            let size = message.body.utf8.count
            guard remaining > 0, size <= bytes || taken.isEmpty && bytes > 0 else {
                remaining = 0
                break
            }
            taken.append(message)
            remaining -= 1
            bytes -= size
        }
        return taken
    }
}

/// The text of a cursor this server hands out: `VERSION.STORE.STAMP` once a read is complete, and
/// `VERSION.STORE.STAMP.A.B.REST` while its pages go on (`REST`, an id, may hold dots). Split here for every cursor;
/// what the parts mean is each cursor's (``SyncToken``, ``ProfileCursor``).
struct CursorText {
    let store: String
    let stamp: Int64
    /// The three parts after the stamp of a cursor whose pages go on.
    let more: (Substring, Substring, Substring)?

    init?(_ text: String, version: Substring) {
        let parts = text.split(separator: ".", maxSplits: 5, omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 6, parts[0] == version, !parts[1].isEmpty,
            let stamp = Int64(parts[2]), stamp >= 0
        else { return nil }
        store = String(parts[1])
        self.stamp = stamp
        more = parts.count == 6 ? (parts[3], parts[4], parts[5]) : nil
    }
}
