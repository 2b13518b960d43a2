// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Everything the server stores, as use-case shaped operations. Each method is one transaction.
///
/// Backends (SQLite, PostgreSQL) implement this and are checked by one contract suite. Nothing here may rely on
/// being the only writer: seq allocation, idempotency and watermark monotonicity are enforced by the database
/// inside the transaction (see docs/architecture.md).
public typealias CourierStore = AccountStore & MessageStore & ConversationStore & ChangeStore & ReceiptStore & ReadStore
    & GroupStore & ModerationStore & ViewStore & ImportStore & MediaStore & TypingStore & ProfileStore
    & ReactionStore
    & WebhookStore & CredentialStore & StoreHealth & StoreObservation

/// What a node's readiness checks of its store (`GET /health/ready`).
public protocol StoreHealth: Sendable {
    /// Succeeds when the store commits a write now: a real one (a row rewritten with its own value), committed and
    /// synced like any other, so that a full disk, a read-only file or database, a standby or a lock held elsewhere
    /// fails it. No data changes.
    func checkWritable() async throws(StorageError)
    /// How the store's connections to its database are doing now, for the metrics (`courier_store_*`).
    var connectionStatistics: ConnectionStatistics { get }
}

extension StoreHealth {
    /// An embedded database is reached by a function call: always reachable, no pool.
    public var connectionStatistics: ConnectionStatistics { ConnectionStatistics(reachable: true, pool: nil) }
}

/// What the metrics say of a store's connections (docs/operations.md).
public struct ConnectionStatistics: Sendable, Hashable {
    /// Whether the database was reached the last time a request needed a connection: `false` from a wait for one
    /// that ran out, or a connection that closed under a request, until the next connection is had.
    public var reachable: Bool
    /// A client-server database's pool; `nil` for an embedded database.
    public var pool: Pool?

    /// Connections leased now, requests waiting for one, and the waits that ran out since the store started.
    public struct Pool: Sendable, Hashable {
        public var inUse: Int
        public var waiting: Int
        public var timeouts: Int
        public init(inUse: Int = 0, waiting: Int = 0, timeouts: Int = 0) {
            self.inUse = inUse
            self.waiting = waiting
            self.timeouts = timeouts
        }
    }

    public init(reachable: Bool, pool: Pool?) {
        self.reachable = reachable
        self.pool = pool
    }
}

/// Accounts known to the server.
public protocol AccountStore: Sendable {
    /// Records that an account exists (idempotent).
    func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError)
    /// Whether an account exists.
    func accountExists(_ account: AccountID) async throws(StorageError) -> Bool
    /// Records that accounts exist (idempotent), all in one transaction.
    func registerAccounts(_ accounts: [AccountID], at time: Timestamp) async throws(StorageError)
    /// Sets the push token of `account`'s `device` (`nil` removes it), in one transaction. A token addresses one app
    /// install: the same token held by any other device or account is removed (the phone changed hands, or the app
    /// signed in as someone else).
    func setPushToken(_ token: PushToken?, of account: AccountID, device: DeviceID) async throws(StorageError)
    /// The push tokens of `account`'s devices, by device id.
    func pushTokens(of account: AccountID) async throws(StorageError) -> [PushToken]
    /// An account as moderation sees it; `nil` when it does not exist.
    func accountStatus(_ account: AccountID) async throws(StorageError) -> AccountStatus?
    /// Accounts in id order after `cursor`, those whose id starts with `prefix` when given.
    func accounts(prefix: String?, after cursor: AccountID?, limit: Int) async throws(StorageError) -> [AccountStatus]
    /// Deactivates `account` at `time` (`nil` reactivates it), and tells every node, in the same transaction, so that
    /// its sessions are closed. `nil` when it does not exist.
    func setDeactivated(_ account: AccountID, at time: Timestamp?) async throws(StorageError) -> AccountStatus?
    /// Refuses every token of `account` issued before `time` from now on, and tells every node, in the same
    /// transaction, so that its sessions are closed. `nil` when it does not exist.
    func revokeTokens(of account: AccountID, before time: Timestamp) async throws(StorageError) -> AccountStatus?
    /// Those of `accounts` that are deactivated or had tokens revoked (a node that may have missed a notification
    /// checks its connected accounts again).
    func restrictedAccounts(among accounts: [AccountID]) async throws(StorageError) -> [AccountStatus]
    /// Tells every other node that `change` happened, when it changes nothing stored (a device disconnected by the
    /// app's backend). Nothing to do where one node is the only one (SQLite).
    func announce(_ change: Change) async throws(StorageError)
}

/// An account as moderation sees it: whether it may connect, and which of its tokens still count.
public struct AccountStatus: Hashable, Sendable {
    public let account: AccountID
    public let createdAt: Timestamp
    /// When it was deactivated; `nil` while it is active. A deactivated account's devices cannot connect; its messages
    /// stay.
    public let deactivatedAt: Timestamp?
    /// Tokens issued before this time are refused (`nil`: none was revoked).
    public let tokensRevokedAt: Timestamp?

    public init(account: AccountID, createdAt: Timestamp, deactivatedAt: Timestamp?, tokensRevokedAt: Timestamp?) {
        self.account = account
        self.createdAt = createdAt
        self.deactivatedAt = deactivatedAt
        self.tokensRevokedAt = tokensRevokedAt
    }
}

/// The conversation logs.
public protocol MessageStore: Sendable {
    /// Appends a message, assigning the next `seq` inside the transaction. Its `time` is the draft's, raised to the
    /// conversation's newest time if the clock went backwards, so time never decreases along seq. Idempotent on `(sender, clientID)`: a
    /// repeat returns the original message with `isDuplicate == true`. The first message of a direct conversation
    /// creates it.
    ///
    /// - Throws: `.accountNotFound` when a participant is unknown.
    func append(_ draft: MessageDraft) async throws(StorageError) -> AppendOutcome
    /// ``append(_:)``, calling `whenQueued` once the append has its place in the store's commit order, if the store
    /// commits in the order writes were queued (SQLite's group commit): an append started after that takes a later
    /// seq, in the same transaction or a later one. The server then starts a connection's next send into the same
    /// conversation without waiting for this one's commit (pipelining, ADR 0018). A store that orders appends
    /// otherwise (PostgreSQL's row lock) never calls it, and the next send waits for the commit.
    func append(
        _ draft: MessageDraft,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> AppendOutcome
    /// Messages with `seq > after`, ascending, at most `limit`.
    func messages(
        in conversation: ConversationID,
        after seq: Seq,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    /// Messages with `seq < before` (all when `nil`), the newest `limit` of them, returned in ascending order.
    func messages(
        in conversation: ConversationID,
        before seq: Seq?,
        limit: Int
    ) async throws(StorageError)
        -> [WireMessage]
    /// One message by id.
    func message(_ id: MessageID) async throws(StorageError) -> WireMessage?
    /// Appends a recall notice (`entry.recall` set) and, in the same transaction, erases the recalled message's body
    /// (a tombstone stays), stops it counting as unread, and removes its quoted excerpt from replies. Idempotent on
    /// `(sender, clientID)` like ``append(_:)``: the same requester recalling again gets the original notice. Whether
    /// the requester may recall it (`rules`, the roles in a group, the window) is decided by ``RecallPlan`` from what
    /// the transaction reads.
    ///
    /// A one-way recall (`mode == .oneWay`) keeps the body and quote in the sender's copy (SPEC §6: the sender's
    /// account keeps the message everywhere), readable through ``senderCopies(of:sender:)`` alone.
    ///
    /// - Throws: `.alreadyRecalled` when another requester recalled it first; `.recallRefused`,
    ///   `.groupRefused(.actorNotAMember)`; `.conversationNotFound` when no message is stored under the notice's
    ///   message id in `entry.conversation` from the notice's sender.
    func recall(_ entry: MessageDraft, rules: RecallPlan.Rules) async throws(StorageError) -> AppendOutcome
    /// Appends an edit entry (`entry.edit` set) and, in the same transaction, rewrites the edited message's row to
    /// the entry's body and `ext` with `edited_at` the entry's time, and requotes its replies (ADR 0054). Idempotent on
    /// `(sender, clientID)` like ``append(_:)``. Whether the editor may edit it (`rules`, the roles in a group, the
    /// window, a recall) is decided by ``EditPlan`` from what the transaction reads.
    ///
    /// - Throws: `.editRefused`, `.groupRefused(.actorNotAMember)`; `.conversationNotFound` when no chat message is
    ///   stored under the notice's message id in `entry.conversation` from the notice's sender.
    func edit(_ entry: MessageDraft, rules: EditPlan.Rules) async throws(StorageError) -> AppendOutcome
    /// Appends `drafts` in order, each as ``append(_:)`` would — a recall notice as ``recall(_:rules:)`` would, with
    /// `recallRules` — (a refusal is that draft's outcome, the others go on); `whenQueued` as in
    /// ``append(_:whenQueued:)``. Throws only when the database fails (nothing of it is then written, or, for a store
    /// that commits them one by one, what came before stays).
    func appendAll(
        _ drafts: [MessageDraft],
        recallRules: RecallPlan.Rules,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> [Result<AppendOutcome, StorageError>]
    /// Erases what recalls announced to nobody (imported history) may have left in old page images: they skip the
    /// purge a live recall waits for, and the import calls this once at its end (SQLite's WAL; a no-op elsewhere).
    func purgeRecalledPages() async throws(StorageError)
    /// The copies one-way recalls kept of `sender`'s messages among `messages`, by message id (messages of other
    /// senders, and two-way recalls, have none).
    func senderCopies(of messages: [MessageID], sender: AccountID) async throws(StorageError) -> [MessageID: SenderCopy]
}

/// What a one-way recall keeps of a message for its sender's account.
public struct SenderCopy: Hashable, Sendable {
    public let body: String
    public let quote: String?
    public let ext: [String: String]?
    public init(body: String, quote: String?, ext: [String: String]? = nil) {
        self.body = body
        self.quote = quote
        self.ext = ext
    }
}

/// Conversations and their members.
public protocol ConversationStore: Sendable {
    /// Every conversation the account is a member of, as the account sees it: its own reading position (private
    /// reads included) and what the other members share. Unread counts are left out (see
    /// ``ReadStore/unreadCounts(of:)``): they cost O(unread) each.
    func conversations(of account: AccountID) async throws(StorageError) -> [ConversationState]
    /// One conversation with what every member shares, or `nil` if it has no messages yet.
    func conversation(_ id: ConversationID) async throws(StorageError) -> ConversationState?
}

/// Receipt watermarks: one row per (conversation, account), never one per message.
public protocol ReceiptStore: Sendable {
    /// Moves `account`'s delivery watermark in `conversation` forward to `seq` (`now`: when, for group delivered
    /// lists). A stale or equal `seq` is a no-op that returns the current watermark.
    ///
    /// - Throws: `.seqBeyondLastMessage` when `seq` is past the conversation's last message;
    ///   `.conversationNotFound` when it has no messages.
    func advanceDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq,
        at now: Timestamp
    ) async throws(StorageError)
        -> DeliveryOutcome
}

extension MessageStore {
    public func purgeRecalledPages() async throws(StorageError) {}

    /// Appends one after the other, each in its own transaction, without telling when they are queued (a store that
    /// commits several at once says so).
    public func appendAll(
        _ drafts: [MessageDraft],
        recallRules: RecallPlan.Rules,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> [Result<AppendOutcome, StorageError>] {
        var outcomes: [Result<AppendOutcome, StorageError>] = []
        for draft in drafts {
            do {
                let result = draft.recall == nil ? try await append(draft) : try await recall(draft, rules: recallRules)
                outcomes.append(.success(result))
            } catch where error.isDatabaseFailure {
                throw error
            } catch {
                outcomes.append(.failure(error))
            }
        }
        return outcomes
    }

    /// Appends without telling when the append is queued: the next send waits for the commit.
    public func append(
        _ draft: MessageDraft,
        whenQueued: (@Sendable () -> Void)?
    ) async throws(StorageError) -> AppendOutcome {
        try await append(draft)
    }
}
