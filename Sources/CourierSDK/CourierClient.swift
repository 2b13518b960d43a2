// Courier — Apache-2.0
public import Foundation
public import CourierWire

/// The Courier SDK's entry point: connects one device of one account, sends and receives messages, keeps a local
/// store that works offline, and reports delivery receipts.
///
/// ```swift
/// let client = try CourierClient(configuration: .init(serverURL: url, store: .file(dbURL)))
/// try await client.connect(account: "alice", token: token)
/// let message = try await client.send("hi", to: .direct("alice", "bob"))
/// for await event in client.events() { … }
/// ```
///
/// Equivalent to NIM's `NIMSDK` + `NIMChatManager`, Agora's `AgoraChatClient` + `chatManager`, RongCloud's
/// `RCCoreClient`.
public final class CourierClient: Sendable {
    public let configuration: Configuration
    let store: LocalStore
    let broadcaster = EventBroadcaster()
    let delegates = DelegateRegistry()
    let sendWaiters = Waiters<ClientMessageID, Message>()
    let readWaiters = Waiters<String, Void>()
    /// Callers of a view change (``setMuted(_:in:)`` …) waiting for the server's answer, by the change's token.
    let viewWaiters = Waiters<String, Void>()
    let connectWaiters = Waiters<Int, Void>()
    /// Ends the reconnect backoff's sleep (``reconnectNow()``).
    let reconnectWakeup = Wakeup()
    let state = Locked(State())
    /// Who is typing where (``typingAccounts(in:)``), in memory only.
    let typingBook = TypingBook()
    /// Accounts this device holds a profile of (ADR 0053): a live message from one of them reads nothing to learn
    /// that its sender is known; only a sender not in it is looked up in the store.
    let profilesHeld = Locked<Set<AccountID>>([])

    struct State {
        var connection: ConnectionState = .disconnected(nil)
        var account: AccountID?
        /// The tokens of the last connect, for the server's media endpoints (``CourierMediaUploader``).
        var credentials: Credentials?
        /// Waiting for the account to be known (``knownAccount()``): a model started before the first connect.
        var accountWaiters: [Int: CheckedContinuation<AccountID?, Never>] = [:]
        var nextAccountWaiter = 0
        var link: Link?
        var runTask: Task<Void, Never>?
        var limits: ServerLimits?
        var readReceiptPolicy: ReadReceiptPolicy = .userChoice
        /// The server's clock less this device's, in milliseconds, from the last connect's answer (its `serverTime`,
        /// taken as of the middle of the round trip): deadlines on the server's clock are shown on the device's.
        var serverClockOffset: Int64 = 0
        var connectAttempt = 0
        /// A push token change not yet acknowledged by the server (sent on the next connection).
        var pushToken: PushTokenRequest?
        /// Queued messages whose attachment is being uploaded (``AttachmentUploader``), beside the connection.
        var uploads: [ClientMessageID: Task<Void, Never>] = [:]
        /// Sends submitted to the server and not answered yet, or lost with their connection (the server may have
        /// stored them): ``SendHandle/cancel()`` cannot take these back.
        var sendsOnTheirWay: Set<ClientMessageID> = []
        /// Sends taken back (``SendHandle/cancel()``): never submitted, even by a flush that read them before.
        var sendsTakenBack: Set<ClientMessageID> = []
        /// Sends this process queued: one queued by an earlier run may have gone out before the app quit (the
        /// submission is not recorded on disk), so only these — and those still uploading — can be taken back.
        var sendsQueuedHere: Set<ClientMessageID> = []
        /// When this device last said it is typing, per conversation (``setTyping(_:in:)``), and whether the server
        /// showed it.
        var typingSent: [ConversationID: ContinuousClock.Instant] = [:]
        var typingShown = true
        /// The last ``setTyping(_:in:)`` under way: the next waits for it.
        var typingTail: Task<Void, Never>?
    }

    /// Creates a client and opens its local store (nothing touches the network until ``connect(account:token:)``).
    ///
    /// A file store that belongs to an account already binds the client to it, so local queries and live queries
    /// work at once, offline. A `.directory` store (the default) opens at the first connect: to read it before,
    /// create the client with ``init(account:configuration:)``.
    ///
    /// - Throws: ``CourierError/localStore(_:)`` when the store cannot be opened.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        do {
            store = try LocalStore(location: configuration.store)
        } catch {
            throw CourierError.localStore(String(describing: error))
        }
        let account = try store.boundAccount()
        state.withLock { $0.account = account }
    }

    /// Creates a client for `account` and opens that account's local store: what the app does at launch for the
    /// signed-in user, before any network. Everything stored is readable at once — messages, conversations, unread
    /// counts, receipts — and live queries follow it; ``connect(account:token:)`` catches up later.
    ///
    /// - Throws: ``CourierError/invalidInput(code:message:)`` for an invalid account id;
    ///   ``CourierError/localStore(_:)`` when the store cannot be opened or holds another account's data.
    public convenience init(account: AccountID, configuration: Configuration) throws {
        guard account.isValid else {
            throw CourierError.invalidInput(code: .invalidArgument, message: "Invalid account id.")
        }
        try self.init(configuration: configuration)
        try store.bind(to: account)
        state.withLock { $0.account = account }
    }

    deinit { state.withLock { $0.runTask?.cancel() } }

    /// The current connection state.
    public var connectionState: ConnectionState { state.withLock { $0.connection } }

    /// The account this client is bound to (set by the first ``connect(account:token:)``).
    public var account: AccountID? { state.withLock { $0.account } }

    // MARK: Events

    /// A new, independent stream of events. Registration happens in this call, not on first iteration, so no event
    /// is lost between creating the stream and iterating it. The buffer is unbounded: keep consuming.
    public func events() -> AsyncStream<CourierEvent> { broadcaster.stream() }

    /// Adds a delegate (held weakly; callbacks on the main actor in event order). Add it before `connect`.
    public func addDelegate(_ delegate: any CourierClientDelegate) { delegates.add(delegate) }

    /// Removes a delegate.
    public func removeDelegate(_ delegate: any CourierClientDelegate) { delegates.remove(delegate) }

    // MARK: Local queries (work offline)

    /// Messages of a conversation from the local store, in seq order: the newest `limit` before `before`. A recalled
    /// message stays in place with status ``MessageStatus/recalled`` and an empty body.
    ///
    /// - Throws: ``CourierError/noAccount`` while the client has no account yet (see ``init(account:configuration:)``).
    public func messages(in conversation: ConversationID, before: Seq? = nil, limit: Int = 50) async throws -> [Message]
    {
        try await store.messages(in: conversation, before: before, limit: limit, me: try boundAccount())
    }

    /// One message from the local store.
    public func message(_ id: MessageID) async throws -> Message? {
        try await store.message(id, me: try boundAccount())
    }

    /// Several messages from the local store, in the order of `ids`; those not stored here are left out (RongCloud
    /// `getMessageByUId:` for each UID).
    public func messages(_ ids: [MessageID]) async throws -> [Message] {
        let me = try boundAccount()
        var found: [Message] = []
        for id in ids { if let message = try await store.message(id, me: me) { found.append(message) } }
        return found
    }

    /// The conversation list from the local store, most recently active first (NIM `allRecentSessions`, Agora
    /// `getAllConversations`).
    public func conversations() async throws -> [Conversation] {
        try await store.conversations(me: try boundAccount())
    }

    /// Messages queued on this device and not yet acknowledged (status `sending`), or refused (`failed`).
    public func pendingMessages(in conversation: ConversationID? = nil) async throws -> [PendingMessage] {
        try await store.pendingMessages(in: conversation)
    }

    /// Removes a message the server refused (status `failed`) from the outbox: it is never sent, and leaves the
    /// lists (live queries included). To send it after all, send it again with the same `clientID` instead. A message
    /// still queued (`sending`) is not removed: it may be on its way.
    ///
    /// - Returns: Whether a failed message with this client id was removed.
    @discardableResult
    public func discardFailedMessage(_ clientID: ClientMessageID) async throws -> Bool {
        _ = try boundAccount()
        return try await store.discardFailed(clientID)
    }

    /// Searches the messages on this device (full-text, offline): text messages whose body holds every word of
    /// `query`, each also as the start of a longer word ("meet" finds "meeting"), case- and accent-insensitive,
    /// newest first. A recalled message is never found. Attachments and your app's own types are not searched.
    /// Words are split by Unicode's rules (SQLite FTS5 `unicode61`): text written without spaces (Chinese, Japanese)
    /// is found by the start of each run of it, not by a word inside one.
    /// NIM `searchMessages:option:result:`, Agora `loadMessagesWithKeyword:timestamp:count:fromUser:searchDirection:completion:`,
    /// RongCloud `searchMessages:targetId:keyword:count:startTime:` (each over the local database, as here).
    ///
    /// - Parameters:
    ///   - query: Words, as the user types them (punctuation is ignored).
    ///   - conversation: Only in this conversation; every conversation when `nil`.
    ///   - limit: At most this many.
    public func searchMessages(
        _ query: String,
        in conversation: ConversationID? = nil,
        limit: Int = 50
    ) async throws -> [Message] {
        try await store.search(query, in: conversation, limit: max(1, limit), me: try boundAccount())
    }

    /// Queues a message the server refused (status `failed`) again, as it was: it goes out on the connection (its
    /// client id makes it idempotent). A message still `sending` is left as it is.
    ///
    /// - Returns: Whether a failed message with this client id was queued again.
    @discardableResult
    public func retryFailedMessage(_ clientID: ClientMessageID) async throws -> Bool {
        _ = try boundAccount()
        let retried = try await store.retryFailed(clientID)
        if retried { state.withLock { $0.link }?.signal() }
        return retried
    }

    /// When you may no longer recall `message` (``recall(_:in:mode:postscript:ext:pushText:pushPayload:countsAsUnread:)``
    /// answers `recall.windowExpired` after it), or `nil` when you may not recall it at all: someone else's message
    /// where you are neither the group's owner nor an admin, a recall tip, a group notice, a message already
    /// recalled. From the windows the server published at connect (`recallWindowMilliseconds`, 120 s before the
    /// first connect) and your role in the group as this device last heard it. An admin may recall only ordinary
    /// members' messages: the server refuses one of an admin or of the owner (`recall.notPermitted`), which this
    /// device cannot tell apart. NIM `revokeMessage`'s time limit, Agora `recallMessage`'s.
    ///
    /// The deadline is on this device's clock: the server's, less the difference the last connect measured, so that
    /// a phone whose clock is off still hides "Recall" when the server starts refusing it.
    public func recallDeadline(for message: Message) async throws -> Date? {
        let me = try boundAccount()
        let role = message.sender != me ? try await store.role(in: message.conversation) : nil
        return recallDeadline(for: message, me: me, role: role)
    }

    /// ``recallDeadline(for:)`` from facts at hand (``ChatModel`` keeps the role): no store read.
    func recallDeadline(for message: Message, me: AccountID, role: MemberRole?) -> Date? {
        guard message.kind == .message, message.status != .recalled else { return nil }
        let limits = state.withLock { $0.limits }
        var window = limits?.recallWindowMilliseconds ?? 120_000
        if message.sender != me {
            guard message.conversation.groupID != nil, role == .owner || role == .admin else { return nil }
            window = limits?.managerRecallWindowMilliseconds ?? window
        }
        return deviceDate(ofServerTime: message.time.rawValue + window)
    }

    /// A moment on the server's clock (milliseconds since 1970) as a date on this device's.
    func deviceDate(ofServerTime milliseconds: Int64) -> Date {
        let offset = state.withLock { $0.serverClockOffset }
        return Date(timeIntervalSince1970: Double(milliseconds - offset) / 1000)
    }

    /// When you may no longer edit `message` (``edit(_:in:body:ext:clientID:)`` answers `edit.windowExpired` after
    /// it), or `nil` when you may not edit it: someone else's message, a recall tip, a group notice, a recalled
    /// message, or a server where devices edit nothing. From the window the server published at connect
    /// (`editWindowMilliseconds`, a day before the first connect). A group's owner and admins may edit members'
    /// messages only where the server allows it, which this device cannot tell: this answers for your own messages.
    public func editDeadline(for message: Message) async throws -> Date? {
        editDeadline(for: message, me: try boundAccount())
    }

    /// ``editDeadline(for:)`` without a store read.
    func editDeadline(for message: Message, me: AccountID) -> Date? {
        guard message.kind == .message, message.status != .recalled, message.sender == me else { return nil }
        let window = state.withLock { $0.limits }?.editWindowMilliseconds ?? 86_400_000
        guard window > 0 else { return nil }
        return deviceDate(ofServerTime: message.time.rawValue + window)
    }

    /// Your role in a group as this device last heard it (the last sync, then membership entries since); `nil` in a
    /// direct conversation or before this device heard of the group.
    public func role(in group: ConversationID) async throws -> MemberRole? {
        _ = try boundAccount()
        return try await store.role(in: group)
    }

    /// The account, once the client knows it: at once when it is bound (a client created for an account, or whose
    /// store is), else at the next ``connect(account:token:)``; `nil` if the caller is cancelled first. What the models
    /// wait for, so that one started at launch, before the app connects, shows the account's data once it does.
    func knownAccount() async -> AccountID? {
        let waiter = state.withLock { state -> Int in
            defer { state.nextAccountWaiter += 1 }
            return state.nextAccountWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<AccountID?, Never>) in
                let now = state.withLock { state -> AccountID?? in
                    if let account = state.account { return .some(account) }
                    if Task.isCancelled { return .some(nil) }
                    state.accountWaiters[waiter] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let continuation = state.withLock { $0.accountWaiters.removeValue(forKey: waiter) }
            continuation?.resume(returning: nil)
        }
    }

    /// Tells those waiting in ``knownAccount()`` (called once `account` is set, outside the lock).
    func accountBecameKnown(_ account: AccountID) {
        let waiting = state.withLock { state -> [CheckedContinuation<AccountID?, Never>] in
            defer { state.accountWaiters = [:] }
            return Array(state.accountWaiters.values)
        }
        for continuation in waiting { continuation.resume(returning: account) }
    }

    func boundAccount() throws(CourierError) -> AccountID {
        guard let account = state.withLock({ $0.account }) else { throw .noAccount }
        return account
    }

    /// The bound account, if it is a member of `conversation`.
    ///
    /// - Throws: ``CourierError/notAMember(_:)``; ``CourierError/noAccount`` before the first connect.
    func member(of conversation: ConversationID) throws(CourierError) -> AccountID {
        let me = try boundAccount()
        // Group membership changes on the server; it answers `conversation.notAMember` when you are not in it.
        if conversation.groupID != nil { return me }
        guard conversation.directMembers.map({ $0.0 == me || $0.1 == me }) == true else {
            throw .notAMember(conversation)
        }
        return me
    }

    /// Sends a request on the connection and returns its ack.
    ///
    /// - Throws: ``CourierError/noAccount``, ``CourierError/notConnected``, or the refusal (about `conversation`).
    func requestAck(about conversation: ConversationID? = nil, _ frame: (RequestID) -> ClientFrame) async throws -> Ack {
        _ = try boundAccount()
        guard let link = state.withLock({ $0.link }) else { throw CourierError.notConnected }
        return try await link.request(frame).ack(about: conversation)
    }

    func setConnectionState(_ new: ConnectionState) {
        let changed = state.withLock { state -> Bool in
            guard state.connection != new else { return false }
            state.connection = new
            return true
        }
        guard changed else { return }
        broadcaster.emit(.connectionStateChanged(new))
        // Disconnected, nobody would say they stopped typing; and this device's indicators are gone with it.
        if case .connected = new { return }
        state.withLock { $0.typingSent = [:] }
        typingBook.clear { broadcaster.emit(.typingChanged($0)) }
    }
}
