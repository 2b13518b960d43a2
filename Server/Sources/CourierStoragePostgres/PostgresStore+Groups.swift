// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

/// Groups on PostgreSQL: the same tables and the same derived receipts as SQLite (docs/decisions/0008). Every change
/// to a group's membership or log takes the group's conversation row lock (`FOR UPDATE`) and a group read takes it
/// shared (`FOR SHARE`), so an audience is never counted while a join, a leave or an append is half done; locks are
/// always taken in the order conversation → receipt → receipt_count.
extension PostgresStore: GroupStore {
    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult {
        do {
            return try await createGroupOnce(entry, members: members)
        } catch .conflict {
            // A concurrent creator of the same group (or a retry of this one) committed first.
            return try await createGroupOnce(entry, members: members)
        }
    }

    private func createGroupOnce(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult
    {
        try await transaction { connection in
            if let original = try await original(of: entry, on: connection) { return original }
            let exists =
                try await connection.query(
                    "SELECT 1 FROM conversation WHERE id = \(entry.conversation.rawValue)",
                    logger: logger
                ).decode(Int.self).first { _ in true } != nil
            guard !exists else { throw StorageError.groupRefused(.alreadyExists) }
            let everyone = [entry.sender] + members.filter { $0 != entry.sender }
            try await requireAccounts(everyone, on: connection)
            try await connection.query(
                "INSERT INTO conversation (id, kind, member_count) VALUES (\(entry.conversation.rawValue), 'group', 0)",
                logger: logger
            )
            let result = try await insertEntry(entry, on: connection)
            try await join([entry.sender], result.message, role: .owner, on: connection)
            try await join(Array(everyone.dropFirst()), result.message, role: .member, on: connection)
            return result
        }
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let change = entry.group else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            let exists = try await lockGroup(group, on: connection)
            // A retry of a change that was applied gets its ack, even once that change dismissed the group.
            if let original = try await original(of: entry, on: connection) { return original }
            guard exists else { throw StorageError.groupRefused(.groupNotFound) }
            var roles: [AccountID: MemberRole] = [:]
            for try await (account, role) in try await connection.query(
                """
                SELECT account, role FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND account = ANY(\(change.accounts.map(\.rawValue)))
                """,
                logger: logger
            ).decode((String, String).self) {
                roles[AccountID(rawValue: account)] = MemberRole(rawValue: role) ?? .member
            }
            let actorRole = try await memberRow(entry.sender, of: group, on: connection)?.role
            let changed = try GroupRules.checked(change, actor: entry.sender, actorRole: actorRole, roles: roles)
            if change.action == .added { try await requireAccounts(changed, on: connection) }
            let stored = entry.with(group: WireGroupChange(action: change.action, accounts: changed, role: change.role))
            let result = try await insertEntry(stored, on: connection)
            switch change.action {
            case .added:
                try await join(changed, result.message, role: .member, on: connection)
            case .removed, .left:
                for account in changed { try await leave(account, of: group, at: result.message.seq, on: connection) }
            case .roleChanged:
                try await setRole(changed, of: group, to: change.role ?? .member, on: connection)
            case .ownerTransferred:
                try await setRole([changed[0]], of: group, to: .owner, on: connection)
                try await setRole([entry.sender], of: group, to: .member, on: connection)
            case .dismissed:
                try await dismiss(group, at: result.message.seq, on: connection)
            case .created:
                break
            }
            return result
        }
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        try await withPooledConnection { connection in try await memberRow(account, of: group, on: connection) }
    }

    public func owner(of group: ConversationID) async throws(StorageError) -> AccountID? {
        try await withPooledConnection { connection in
            try await connection.query(
                """
                SELECT account FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND role = 'owner' LIMIT 1
                """,
                logger: logger
            ).decode(String.self).first { _ in true }.map(AccountID.init(rawValue:))
        }
    }

    public func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool {
        try await withPooledConnection { connection in
            try await connection.query(
                "SELECT kind FROM conversation WHERE id = \(group.rawValue) AND dismissed_seq IS NULL",
                logger: logger
            ).decode(String.self).first { _ in true } == ConversationKind.group.rawValue
        }
    }

    public func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int) {
        try await withPooledConnection { connection in
            var members: [GroupMember] = []
            for try await row in try await connection.query(
                """
                SELECT account, role, joined_seq FROM conversation_member
                WHERE conversation_id = \(group.rawValue) AND account > \(after?.rawValue ?? "")
                ORDER BY account LIMIT \(limit)
                """,
                logger: logger
            ).decode((String, String, Int64).self) {
                members.append(Self.groupMember(row))
            }
            let total =
                try await connection.query(
                    "SELECT member_count FROM conversation WHERE id = \(group.rawValue)",
                    logger: logger
                ).decode(Int64.self).first { _ in true } ?? 0
            return (members, Int(total))
        }
    }

    public func memberAccounts(of group: ConversationID) async throws(StorageError) -> [AccountID] {
        try await withPooledConnection { connection in
            try await connection.query(
                "SELECT account FROM conversation_member WHERE conversation_id = \(group.rawValue)",
                logger: logger
            ).decode(String.self).reduce(into: [AccountID]()) { $0.append(AccountID(rawValue: $1)) }
        }
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        guard let messageID = entry.receiptRequest else { return try await append(entry) }
        return try await transaction { connection in
            let group = entry.conversation
            guard try await lockGroup(group, on: connection) else {
                throw StorageError.conversationNotFound(group)
            }
            if let original = try await original(of: entry, on: connection) { return original }
            guard
                let target = try await fetchMessages(
                    on: connection,
                    "WHERE id = \(messageID.rawValue) AND conversation_id = \(group.rawValue)"
                ).first
            else { throw StorageError.conversationNotFound(group) }
            guard target.needsReadReceipt != true else { throw StorageError.groupRefused(.alreadyRequested) }
            guard try await memberRow(entry.sender, of: group, on: connection) != nil else {
                throw StorageError.groupRefused(.actorNotAMember)
            }
            // The audience as of now: members who were there at send time (still here, or gone after reading it).
            // Reads hold the group's row shared, so none is half counted while this holds it exclusively.
            let seq = target.seq.rawValue
            let counted =
                try await connection.query(
                    """
                    SELECT count(*), count(*) FILTER (WHERE r.read_seq >= \(seq) OR EXISTS (SELECT 1 FROM read_ack a
                        WHERE a.conversation_id = cm.conversation_id AND a.account = cm.account AND a.seq = \(seq)
                            AND a.shared))
                    FROM conversation_member cm
                    JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
                    WHERE cm.conversation_id = \(group.rawValue) AND cm.joined_seq < \(seq)
                        AND cm.account <> \(target.sender.rawValue)
                    """,
                    logger: logger
                ).decode((Int64, Int64).self).first { _ in true }
            let current: (Int64, Int64) = counted ?? (0, 0)
            let formerReaders = try await formerMembers(of: group, around: target.seq, on: connection)
                .filter { $0.account != target.sender && $0.read(target.seq) != nil }.count
            let result = try await insertEntry(entry, on: connection)
            try await connection.query(
                "UPDATE message SET needs_receipt = TRUE WHERE id = \(messageID.rawValue)",
                logger: logger
            )
            try await insertTally(
                target,
                audience: Int(current.0) + formerReaders,
                readCount: Int(current.1) + formerReaders,
                on: connection
            )
            return result
        }
    }

    public func receiptCounts(
        in group: ConversationID,
        seqs: [Seq]
    ) async throws(StorageError) -> [Seq: ReceiptTally] {
        try await withPooledConnection { connection in
            var tallies: [Seq: ReceiptTally] = [:]
            for try await row in try await connection.query(
                """
                SELECT message_id, sender, audience, read_count, seq FROM receipt_count
                WHERE conversation_id = \(group.rawValue) AND seq = ANY(\(Set(seqs).map(\.rawValue)))
                """,
                logger: logger
            ).decode((String, String, Int64, Int64, Int64).self) {
                tallies[Seq(row.4)] = Self.tally(row)
            }
            return tallies
        }
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        try await withPooledConnection { connection in try await receiptList(query, on: connection) }
    }
}

// MARK: Membership

extension PostgresStore {
    /// Locks a group's conversation row until commit; `false` when there is no such group.
    /// Locks `group`'s row; `false` if it is not a group or was dismissed.
    func lockGroup(_ group: ConversationID, on connection: PostgresConnection) async throws -> Bool {
        try await connection.query(
            "SELECT kind FROM conversation WHERE id = \(group.rawValue) AND dismissed_seq IS NULL FOR UPDATE",
            logger: logger
        ).decode(String.self).first { _ in true } == ConversationKind.group.rawValue
    }

    /// Ends every membership of a group at once, the dismissal at `seq` being its last entry (``GroupStore``). The
    /// caller holds the group's row lock.
    func dismiss(_ group: ConversationID, at seq: Seq, on connection: PostgresConnection) async throws {
        let id = group.rawValue
        try await connection.query("DELETE FROM read_ack WHERE conversation_id = \(id)", logger: logger)
        try await connection.query("DELETE FROM receipt WHERE conversation_id = \(id)", logger: logger)
        try await connection.query("DELETE FROM conversation_member WHERE conversation_id = \(id)", logger: logger)
        try await connection.query("DELETE FROM former_member WHERE conversation_id = \(id)", logger: logger)
        try await connection.query("DELETE FROM receipt_count WHERE conversation_id = \(id)", logger: logger)
        try await connection.query(
            "UPDATE conversation SET member_count = 0, dismissed_seq = \(seq.rawValue) WHERE id = \(id)",
            logger: logger
        )
    }

    func memberRow(
        _ account: AccountID,
        of group: ConversationID,
        on connection: PostgresConnection
    ) async throws -> GroupMember? {
        try await connection.run(MemberRow.self, .of(group.rawValue, account.rawValue), logger: logger).first
            .map { Self.groupMember(try $0.decode((String, String, Int64).self)) }
    }

    enum MemberRow: HotStatement {
        static let sql = "SELECT account, role, joined_seq FROM conversation_member WHERE conversation_id = $1 AND account = $2"
    }

    static func groupMember(_ row: (String, String, Int64)) -> GroupMember {
        GroupMember(
            account: AccountID(rawValue: row.0),
            role: MemberRole(rawValue: row.1) ?? .member,
            joinedSeq: Seq(row.2)
        )
    }

    /// Throws `accountNotFound` for the first account that is not registered.
    func requireAccounts(_ accounts: [AccountID], on connection: PostgresConnection) async throws {
        let known = try await connection.query(
            "SELECT id FROM account WHERE id = ANY(\(accounts.map(\.rawValue)))",
            logger: logger
        ).decode(String.self).reduce(into: Set<String>()) { $0.insert($1) }
        if let missing = accounts.first(where: { !known.contains($0.rawValue) }) {
            throw StorageError.accountNotFound(missing)
        }
    }

    /// Adds members whose positions start at the entry that added them (nothing sent before counts for them): three
    /// statements whatever the number of accounts.
    func join(
        _ accounts: [AccountID],
        _ entry: WireMessage,
        role: MemberRole,
        on connection: PostgresConnection
    ) async throws {
        guard !accounts.isEmpty else { return }
        let group = entry.conversation.rawValue
        let names = accounts.map(\.rawValue)
        let (seq, time) = (entry.seq.rawValue, entry.time.rawValue)
        try await connection.query(
            """
            INSERT INTO conversation_member (conversation_id, account, role, joined_seq)
            SELECT \(group), unnest(\(names)::text[]), \(role.rawValue), \(seq)
            """,
            logger: logger
        )
        // A joiner starts at the join entry. A row left by a delivery that raced an earlier removal (before
        // deliveries took the group's lock) is reset instead of failing the join for ever.
        try await connection.query(
            """
            INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, read_seq, read_time,
                own_read_seq, own_read_time, read_at, delivered_at, stamp)
            SELECT \(group), unnest(\(names)::text[]), \(seq), \(time), \(seq), \(time), \(seq), \(time), \(time),
                \(time), change_stamp()
            ON CONFLICT (conversation_id, account) DO UPDATE SET
                stamp = EXCLUDED.stamp,
                delivered_seq = EXCLUDED.delivered_seq, delivered_time = EXCLUDED.delivered_time,
                read_seq = EXCLUDED.read_seq, read_time = EXCLUDED.read_time,
                own_read_seq = EXCLUDED.own_read_seq, own_read_time = EXCLUDED.own_read_time,
                read_at = EXCLUDED.read_at, delivered_at = EXCLUDED.delivered_at
            """,
            logger: logger
        )
        try await connection.query(
            "UPDATE conversation SET member_count = member_count + \(Int64(accounts.count)) WHERE id = \(group)",
            logger: logger
        )
    }

    /// Removes a member: the messages it had not read drop it from their audience; what it read stays read (its
    /// position is kept, frozen, in `former_member`).
    func leave(
        _ account: AccountID,
        of group: ConversationID,
        at seq: Seq,
        on connection: PostgresConnection
    )
        async throws
    {
        let conversation = group.rawValue
        guard let member = try await memberRow(account, of: group, on: connection) else { return }
        let position = try await connection.query(
            """
            SELECT read_seq, read_at FROM receipt WHERE conversation_id = \(conversation) AND account = \(account.rawValue)
            FOR UPDATE
            """,
            logger: logger
        ).decode((Int64, Int64).self).first { _ in true }
        let readSeq = position?.0 ?? member.joinedSeq.rawValue
        let readAt = position?.1 ?? 0
        var acks: [FormerMember.Ack] = []
        for try await (ackSeq, time) in try await connection.query(
            """
            SELECT seq, time FROM read_ack WHERE conversation_id = \(conversation) AND account = \(account.rawValue)
                AND shared ORDER BY seq
            """,
            logger: logger
        ).decode((Int64, Int64).self) {
            acks.append(FormerMember.Ack(seq: Seq(ackSeq), time: Timestamp(milliseconds: time)))
        }
        try await connection.query(
            """
            UPDATE receipt_count SET audience = audience - 1
            WHERE conversation_id = \(conversation) AND seq > \(max(readSeq, member.joinedSeq.rawValue))
                AND sender <> \(account.rawValue) AND NOT (seq = ANY(\(acks.map(\.seq.rawValue))))
            """,
            logger: logger
        )
        try await connection.query(
            """
            INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks)
            VALUES (\(conversation), \(account.rawValue), \(member.joinedSeq.rawValue), \(seq.rawValue), \(readSeq),
                \(readAt), \(FormerMember.encode(acks)))
            ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
            """,
            logger: logger
        )
        for table in ["read_ack", "receipt", "conversation_member"] {
            try await connection.query(
                "DELETE FROM \(unescaped: table) WHERE conversation_id = \(conversation) AND account = \(account.rawValue)",
                logger: logger
            )
        }
        try await connection.query(
            "UPDATE conversation SET member_count = member_count - 1 WHERE id = \(conversation)",
            logger: logger
        )
    }

    func setRole(
        _ accounts: [AccountID],
        of group: ConversationID,
        to role: MemberRole,
        on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            UPDATE conversation_member SET role = \(role.rawValue)
            WHERE conversation_id = \(group.rawValue) AND account = ANY(\(accounts.map(\.rawValue)))
            """,
            logger: logger
        )
    }

    /// Former members whose membership covered `seq` (they may be readers of it).
    func formerMembers(
        of group: ConversationID,
        around seq: Seq,
        on connection: PostgresConnection
    ) async throws -> [FormerMember] {
        var former: [FormerMember] = []
        for try await (account, readSeq, readAt, acks) in try await connection.query(
            """
            SELECT account, read_seq, read_at, acks FROM former_member
            WHERE conversation_id = \(group.rawValue) AND joined_seq < \(seq.rawValue) AND left_seq > \(seq.rawValue)
            ORDER BY account
            """,
            logger: logger
        ).decode((String, Int64, Int64, String).self) {
            former.append(
                FormerMember(
                    account: AccountID(rawValue: account),
                    readSeq: Seq(readSeq),
                    readAt: Timestamp(milliseconds: readAt),
                    acks: FormerMember.decode(acks)
                )
            )
        }
        return former
    }
}
