// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// Runs a group change's plan in the caller's transaction: its entry, then its writes.
    func apply(_ plan: GroupChangePlan, on connection: PostgresConnection) async throws -> AppendResult {
        if !plan.accountsToCheck.isEmpty { try await requireAccounts(plan.accountsToCheck, on: connection) }
        let result = try await insertEntry(plan.entry, on: connection)
        let (group, seq) = (result.message.conversation, result.message.seq)
        for write in plan.writes {
            switch write {
            case .join(let accounts, let role): try await join(accounts, result.message, role: role, on: connection)
            case .leave(let account): try await leave(account, of: group, at: seq, on: connection)
            case .setRole(let accounts, let role): try await setRole(accounts, of: group, to: role, on: connection)
            case .dismiss: try await dismiss(group, at: seq, on: connection)
            }
        }
        return result
    }

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
        let shared = try await connection.query(
            """
            SELECT read_seq, read_at FROM receipt WHERE conversation_id = \(conversation) AND account = \(account.rawValue)
            FOR UPDATE
            """,
            logger: logger
        ).decode((Int64, Int64).self).first { _ in true }.map { (seq: Seq($0.0), at: Timestamp(milliseconds: $0.1)) }
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
        let plan = LeavePlan(member: member, shared: shared, acks: acks, at: seq)
        try await connection.query(
            """
            UPDATE receipt_count SET audience = audience - 1
            WHERE conversation_id = \(conversation) AND seq > \(plan.unreadAbove.rawValue)
                AND sender <> \(account.rawValue) AND NOT (seq = ANY(\(plan.acks.map(\.seq.rawValue))))
            """,
            logger: logger
        )
        try await connection.query(
            """
            INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks)
            VALUES (\(conversation), \(account.rawValue), \(plan.joinedSeq.rawValue), \(plan.leftSeq.rawValue),
                \(plan.readSeq.rawValue), \(plan.readAt.rawValue), \(plan.encodedAcks))
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
        try await connection.rows(FormerMember.query(of: group, around: seq), logger: logger).map(FormerMember.init)
    }
}
