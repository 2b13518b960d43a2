// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// What moderation lists and looks for: conversations, and the messages a purge erases.
public protocol ModerationStore: Sendable {
    /// Conversations in id order after `cursor` that `filter` selects; a dismissed group's is not among them.
    func conversations(
        _ filter: ConversationFilter,
        after cursor: ConversationID?,
        limit: Int
    ) async throws(StorageError) -> [ConversationSummary]
    /// Up to `limit` chat messages of `scope` sent before `time` and not yet erased, oldest first: what a purge erases
    /// next (each by a recall's transaction, which decides again whether it is still there to erase).
    func purgeCandidates(
        _ scope: PurgeScope,
        before time: Timestamp,
        limit: Int
    ) async throws(StorageError) -> [PurgeCandidate]
    /// Deletes the copies their senders kept of the messages of `scope` sent before `time` that were recalled one
    /// way (what a purge erases of them: the body their senders still saw).
    func dropSenderCopies(_ scope: PurgeScope, before time: Timestamp) async throws(StorageError)
}

/// A message a purge erases next.
public struct PurgeCandidate: Hashable, Sendable {
    public let message: MessageID
    public let conversation: ConversationID
    public let sender: AccountID

    package init(message: MessageID, conversation: ConversationID, sender: AccountID) {
        self.message = message
        self.conversation = conversation
        self.sender = sender
    }
}

/// Which conversations a list shows.
public struct ConversationFilter: Hashable, Sendable {
    /// Only those this account is a member of.
    public var member: AccountID?
    public var kind: ConversationKind?
    /// Only those whose id starts with this.
    public var prefix: String?

    public init(member: AccountID? = nil, kind: ConversationKind? = nil, prefix: String? = nil) {
        self.member = member
        self.kind = kind
        self.prefix = prefix
    }
}

/// A conversation as a list shows it.
public struct ConversationSummary: Hashable, Sendable {
    public let id: ConversationID
    public let kind: ConversationKind
    public let memberCount: Int
    public let lastSeq: Seq
    public let lastTime: Timestamp

    package init(id: ConversationID, kind: ConversationKind, memberCount: Int, lastSeq: Seq, lastTime: Timestamp) {
        self.id = id
        self.kind = kind
        self.memberCount = memberCount
        self.lastSeq = lastSeq
        self.lastTime = lastTime
    }
}

/// Whose messages a purge erases.
public enum PurgeScope: Hashable, Sendable {
    /// What an account sent, in every conversation.
    case account(AccountID)
    /// What anyone sent in one conversation.
    case conversation(ConversationID)
}

/// Which devices are connected to which node, where several nodes share the store (PostgreSQL), so that any node
/// lists an account's devices on all of them. A single node (SQLite) answers from its own connections.
public protocol PresenceStore: Sendable {
    /// This node's name in ``connectedDevices(of:)``.
    var nodeID: String { get }
    /// Records that `device` of `account` connected to this node through `connection`, and reads the account's
    /// status, in one transaction (a connect reads it anyway).
    func recordConnected(
        _ connection: Int64,
        account: AccountID,
        device: DeviceID,
        at time: Timestamp
    ) async throws(StorageError) -> AccountStatus?
    /// Records that these connections of this node ended.
    func recordDisconnected(_ connections: [Int64]) async throws(StorageError)
    /// Forgets the connections of nodes that are gone, and this node's own when it stops (`includingOwn`).
    func forgetConnections(includingOwn: Bool) async throws(StorageError)
    /// `account`'s devices connected to live nodes, by device id.
    func connectedDevices(of account: AccountID) async throws(StorageError) -> [ConnectedDevice]
}

/// One connected device, and the node it is connected to.
public struct ConnectedDevice: Hashable, Sendable {
    public let device: DeviceID
    public let node: String
    public let connectedAt: Timestamp

    public init(device: DeviceID, node: String, connectedAt: Timestamp) {
        self.device = device
        self.node = node
        self.connectedAt = connectedAt
    }
}
