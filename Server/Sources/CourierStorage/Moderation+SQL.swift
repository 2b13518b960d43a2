// Courier — Apache-2.0
public import CourierWire

/// What moderation lists and looks for (issue 36): conversations, and the messages a purge erases.
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
}

/// Whose messages a purge erases.
public enum PurgeScope: Hashable, Sendable {
    /// What an account sent, in every conversation.
    case account(AccountID)
    /// What anyone sent in one conversation.
    case conversation(ConversationID)
}

extension ModerationStore where Self: SQLRunner {
    public func conversations(
        _ filter: ConversationFilter,
        after cursor: ConversationID?,
        limit: Int
    ) async throws(StorageError) -> [ConversationSummary] {
        // As with accounts, the prefix is compared as text (`substr`), not as a range of ids (collations differ).
        let prefix = filter.prefix ?? ""
        var query: SQLQuery = """
            SELECT c.id, c.kind, c.member_count, c.last_seq, c.last_time FROM conversation c
            WHERE c.id > \(cursor?.rawValue ?? "") AND c.dismissed_seq IS NULL
              AND substr(c.id, 1, \(unescaped: String(prefix.utf8.count))) = \(prefix)
            """
        if let kind = filter.kind { query += " AND c.kind = \(kind.rawValue)" }
        if let member = filter.member {
            query += """
                 AND EXISTS (SELECT 1 FROM conversation_member m WHERE m.conversation_id = c.id
                    AND m.account = \(member.rawValue))
                """
        }
        query += " ORDER BY c.id LIMIT \(limit)"
        return try await readRows(query).map { row throws(StorageError) in
            let kind = ConversationKind(rawValue: try row.string(1)) ?? .direct
            return ConversationSummary(
                id: ConversationID(rawValue: try row.string(0)),
                kind: kind,
                memberCount: kind == .direct ? 2 : try row.int(2),
                lastSeq: Seq(try row.int64(3)),
                lastTime: Timestamp(milliseconds: try row.int64(4))
            )
        }
    }

    public func dropSenderCopies(_ scope: PurgeScope, before time: Timestamp) async throws(StorageError) {
        let condition: SQLQuery =
            switch scope {
            case .account(let account): "sender = \(account.rawValue)"
            case .conversation(let conversation): "conversation_id = \(conversation.rawValue)"
            }
        _ = try await writeRows(
            """
            DELETE FROM sender_copy WHERE message_id IN (
                SELECT id FROM message WHERE \(condition) AND time < \(time.rawValue) AND recalled = TRUE)
            """
        )
    }

    public func purgeCandidates(
        _ scope: PurgeScope,
        before time: Timestamp,
        limit: Int
    ) async throws(StorageError) -> [PurgeCandidate] {
        // By the index each scope has: (sender, client_id) for an account, (conversation_id, seq) for a conversation.
        let (condition, order): (SQLQuery, String) =
            switch scope {
            case .account(let account): ("sender = \(account.rawValue)", "time, id")
            case .conversation(let conversation): ("conversation_id = \(conversation.rawValue)", "seq")
            }
        return try await readRows(
            """
            SELECT id, conversation_id, sender FROM message
            WHERE \(condition) AND time < \(time.rawValue) AND recalled = FALSE
              AND recall IS NULL AND group_change IS NULL AND receipt_request IS NULL
              AND conversation_id NOT IN (SELECT id FROM conversation WHERE dismissed_seq IS NOT NULL)
            ORDER BY \(unescaped: order) LIMIT \(limit)
            """
        ).map { row throws(StorageError) in
            PurgeCandidate(
                message: MessageID(rawValue: try row.string(0)),
                conversation: ConversationID(rawValue: try row.string(1)),
                sender: AccountID(rawValue: try row.string(2))
            )
        }
    }
}

/// Which devices are connected to which node, where several nodes share the store (PostgreSQL), so that any node
/// lists an account's devices on all of them (issue 36). A single node (SQLite) answers from its own connections.
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
