// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
public import CourierWire

/// The writes of a ``GroupChangePlan`` after its entry, written once for every backend: each backend appends the
/// entry (its own hot path) and runs this in the same transaction, its caller holding the group's lock where the
/// backend has one.
public struct GroupChangeProcedure: SQLProcedure {
    private enum State {
        case next
        case leaveMember(AccountID)
        case leaveShared(AccountID, GroupMember)
        case leaveAcks(AccountID, GroupMember, shared: (seq: Seq, at: Timestamp)?)
    }

    private let entry: WireMessage
    private var writes: ArraySlice<GroupChangePlan.Write>
    private var queued: [SQLQuery] = []
    private var state = State.next

    /// - Parameters:
    ///   - plan: The change's plan.
    ///   - entry: Its entry as appended.
    public init(_ plan: GroupChangePlan, entry: WireMessage) {
        self.entry = entry
        writes = plan.writes[...]
        // The group's membership version: an entry appended from now on goes to the membership this change leaves.
        queued = [
            "UPDATE conversation SET membership_seq = \(entry.seq.rawValue) WHERE id = \(entry.conversation.rawValue)"
        ]
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Void> {
        let rows = rows ?? []
        let group = entry.conversation.rawValue
        switch state {
        case .next:
            break
        case .leaveMember(let account):
            guard let row = rows.first else {
                state = .next
                break
            }
            let member = try GroupMember(row)
            state = .leaveShared(account, member)
            // Locked: a read of the leaver racing the leave waits for it.
            return .run(
                """
                SELECT read_seq, read_at FROM receipt WHERE conversation_id = \(group) AND account = \(account.rawValue)
                \(lockRows: ())
                """
            )
        case .leaveShared(let account, let member):
            let shared = try rows.first.map { row throws(StorageError) in
                (seq: Seq(try row.int64(0)), at: Timestamp(milliseconds: try row.int64(1)))
            }
            state = .leaveAcks(account, member, shared: shared)
            return .run(
                """
                SELECT seq, time FROM read_ack WHERE conversation_id = \(group) AND account = \(account.rawValue)
                    AND shared ORDER BY seq
                """
            )
        case .leaveAcks(let account, let member, let shared):
            let acks = try rows.map { row throws(StorageError) in
                FormerMember.Ack(seq: Seq(try row.int64(0)), time: Timestamp(milliseconds: try row.int64(1)))
            }
            queued += Self.leave(account, plan: LeavePlan(member: member, shared: shared, acks: acks, at: entry.seq), group)
            state = .next
        }
        while queued.isEmpty, let write = writes.popFirst() {
            switch write {
            case .join(let accounts, let role):
                guard !accounts.isEmpty else { continue }
                queued = Self.join(accounts.map(\.rawValue), role: role, entry)
            case .leave(let account):
                state = .leaveMember(account)
                return .run(GroupMember.query(account, of: entry.conversation))
            case .setRole(let accounts, let role):
                queued = [
                    """
                    UPDATE conversation_member SET role = \(role.rawValue)
                    WHERE conversation_id = \(group) AND account IN \(list: accounts.map(\.rawValue))
                    """
                ]
            case .dismiss:
                queued = Self.dismiss(entry)
            case .setProfile(let profile):
                queued = [try Self.setProfile(profile, of: group)]
            }
        }
        guard !queued.isEmpty else { return .done(()) }
        return .run(queued.removeFirst())
    }

    /// The profile's fields as the change says: an absent one stays, an empty text (or `ext`) clears it.
    static func setProfile(_ profile: GroupProfile, of group: String) throws(StorageError) -> SQLQuery {
        let ext = try EntryJSON.settable(profile.ext, of: "A group")
        return """
            UPDATE conversation SET
                group_name = nullif(coalesce(\(profile.name), group_name, ''), ''),
                group_avatar = nullif(coalesce(\(profile.avatar), group_avatar, ''), ''),
                group_announcement = nullif(coalesce(\(profile.announcement), group_announcement, ''), ''),
                group_ext = nullif(coalesce(\(ext), group_ext, ''), '')
            WHERE id = \(group)
            """
    }

    /// Members whose positions start at the entry that added them (nothing sent before counts for them): three
    /// statements whatever the number of accounts.
    static func join(_ accounts: [String], role: MemberRole, _ entry: WireMessage) -> [SQLQuery] {
        let (group, seq, time) = (entry.conversation.rawValue, entry.seq.rawValue, entry.time.rawValue)
        return [
            """
            INSERT INTO conversation_member (conversation_id, account, role, joined_seq)
            SELECT \(group), value, \(role.rawValue), \(seq) FROM \(list: accounts) AS l
            """,
            // A row left by a delivery that raced an earlier removal (before deliveries took the group's lock on
            // PostgreSQL) is reset instead of failing the join for ever.
            """
            INSERT INTO receipt (conversation_id, account, delivered_seq, delivered_time, read_seq, read_time,
                own_read_seq, own_read_time, read_at, delivered_at, stamp)
            SELECT \(group), value, \(seq), \(time), \(seq), \(time), \(seq), \(time), \(time), \(time), change_stamp()
            FROM \(list: accounts) AS l WHERE true
            ON CONFLICT (conversation_id, account) DO UPDATE SET
                stamp = excluded.stamp,
                delivered_seq = excluded.delivered_seq, delivered_time = excluded.delivered_time,
                read_seq = excluded.read_seq, read_time = excluded.read_time,
                own_read_seq = excluded.own_read_seq, own_read_time = excluded.own_read_time,
                read_at = excluded.read_at, delivered_at = excluded.delivered_at
            """,
            "UPDATE conversation SET member_count = member_count + \(accounts.count) WHERE id = \(group)",
        ]
    }

    /// Every membership ends at once, the dismissal being the group's last entry: each member becomes a former member
    /// whose membership ended at it (who the entry went to stays readable, for the devices of every node and for
    /// sync), and what only a live group needs goes.
    static func dismiss(_ entry: WireMessage) -> [SQLQuery] {
        let (group, seq) = (entry.conversation.rawValue, entry.seq.rawValue)
        return [
            """
            INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks, stamp)
            SELECT m.conversation_id, m.account, m.joined_seq, \(seq), COALESCE(r.read_seq, m.joined_seq),
                COALESCE(r.read_at, 0), '[]', change_stamp()
            FROM conversation_member m
            LEFT JOIN receipt r ON r.conversation_id = m.conversation_id AND r.account = m.account
            WHERE m.conversation_id = \(group)
            ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
            """
        ]
            + ["read_ack", "deleted_message", "conversation_view", "receipt", "conversation_member", "receipt_count"].map {
                "DELETE FROM \(unescaped: $0) WHERE conversation_id = \(group)"
            }
            + ["UPDATE conversation SET member_count = 0, dismissed_seq = \(seq) WHERE id = \(group)"]
    }

    /// A member leaves: the messages it had not read drop it from their audience; what it read stays read (its
    /// position is kept, frozen, in `former_member`).
    static func leave(_ account: AccountID, plan: LeavePlan, _ group: String) -> [SQLQuery] {
        let account = account.rawValue
        return [
            """
            UPDATE receipt_count SET audience = audience - 1
            WHERE conversation_id = \(group) AND seq > \(plan.unreadAbove.rawValue) AND sender <> \(account)
                AND seq NOT IN \(list: plan.acks.map(\.seq.rawValue))
            """,
            """
            INSERT INTO former_member (conversation_id, account, joined_seq, left_seq, read_seq, read_at, acks, stamp)
            VALUES (\(group), \(account), \(plan.joinedSeq.rawValue), \(plan.leftSeq.rawValue),
                \(plan.readSeq.rawValue), \(plan.readAt.rawValue), \(plan.encodedAcks), change_stamp())
            ON CONFLICT (conversation_id, account, joined_seq) DO NOTHING
            """,
        ]
            // Its view (ADR 0029) ends with the membership: a later one starts with none.
            + ["read_ack", "deleted_message", "conversation_view", "receipt", "conversation_member"].map {
                "DELETE FROM \(unescaped: $0) WHERE conversation_id = \(group) AND account = \(account)"
            }
            + ["UPDATE conversation SET member_count = member_count - 1 WHERE id = \(group)"]
    }
}

extension GroupMember {
    /// `account`'s membership of `group`, if any: ``init(_:)`` reads it.
    public static func query(_ account: AccountID, of group: ConversationID) -> SQLQuery {
        """
        SELECT account, role, joined_seq FROM conversation_member
        WHERE conversation_id = \(group.rawValue) AND account = \(account.rawValue)
        """
    }

    public init(_ row: SQLRow) throws(StorageError) {
        self.init(
            account: AccountID(rawValue: try row.string(0)),
            role: MemberRole(rawValue: try row.string(1)) ?? .member,
            joinedSeq: Seq(try row.int64(2))
        )
    }
}

extension GroupChangePlan {
    /// Reads the roles a change needs (the accounts it names that are members, and its sender) and plans it: what
    /// ``init(_:actorRole:roles:)`` decides, in the caller's transaction, after the backend took the group's lock.
    public struct Facts: SQLProcedure {
        private let entry: MessageDraft

        public init(_ entry: MessageDraft) {
            self.entry = entry
        }

        public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<GroupChangePlan> {
            guard let rows else {
                let named = (entry.group?.accounts ?? []) + [entry.sender]
                return .run(
                    """
                    SELECT account, role FROM conversation_member
                    WHERE conversation_id = \(entry.conversation.rawValue) AND account IN \(list: named.map(\.rawValue))
                    """
                )
            }
            var roles: [AccountID: MemberRole] = [:]
            for row in rows {
                roles[AccountID(rawValue: try row.string(0))] = MemberRole(rawValue: try row.string(1)) ?? .member
            }
            let actorRole = roles[entry.sender]
            if !(entry.group?.accounts ?? []).contains(entry.sender) { roles[entry.sender] = nil }
            return .done(try GroupChangePlan(entry, actorRole: actorRole, roles: roles))
        }
    }
}
