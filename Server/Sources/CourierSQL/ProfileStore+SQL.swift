// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Account profiles (ADR 0053), written once for every backend that runs ``SQLQuery``s.
extension ProfileStore where Self: SQLRunner {
    public func setAccountProfiles(
        _ changes: [AccountProfileChange],
        at time: Timestamp,
        announced: Bool
    ) async throws(StorageError) -> [AccountProfile] {
        guard !changes.isEmpty else { return [] }
        var notices: [SQLQuery] = []
        for account in Set(changes.map(\.account)).sorted(by: { $0.rawValue < $1.rawValue }) where announced {
            if let notify = try notification(.profile(account)) { notices.append(notify) }
        }
        // The rows are written in account order whatever the call's order, so two calls naming the same accounts take
        // their locks in one order (PostgreSQL); the profiles are answered in the call's order.
        let sorted = changes.enumerated().sorted { $0.element.account.rawValue < $1.element.account.rawValue }
        let written = try await write(
            SetProfilesProcedure(changes: sorted.map(\.element), time: time, announced: announced, notices: notices)
        )
        var answered = written
        for (position, (index, _)) in sorted.enumerated() { answered[index] = written[position] }
        return answered
    }

    public func accountProfiles(of accounts: [AccountID]) async throws(StorageError) -> [AccountProfile] {
        guard !accounts.isEmpty else { return [] }
        let rows = try await readRows(
            """
            SELECT \(unescaped: AccountProfile.columns) FROM account
            WHERE id IN \(list: accounts.map(\.rawValue))
            """
        )
        var found: [AccountID: AccountProfile] = [:]
        for row in rows {
            let profile = try AccountProfile(row)
            found[profile.account] = profile
        }
        return accounts.compactMap { found[$0] }
    }

    public func changedProfiles(
        seenBy account: AccountID,
        from stamp: Int64,
        after position: ProfilePosition?,
        limit: Int
    ) async throws(StorageError) -> [AccountProfile] {
        // By the partial index of profiles ever set, in (stamp, id) order; each candidate is kept when it is the
        // reader or shares a conversation with it (its memberships by the account index, the reader's by the key).
        try await readRows(
            """
            SELECT \(unescaped: AccountProfile.columns) FROM account a
            WHERE a.profile_stamp > 0 AND a.profile_stamp >= \(stamp)
              AND (a.profile_stamp, a.id) > (\(position?.stamp ?? -1), \(position?.account.rawValue ?? ""))
              AND (a.id = \(account.rawValue) OR EXISTS (
                  SELECT 1 FROM conversation_member theirs
                  JOIN conversation_member mine
                    ON mine.conversation_id = theirs.conversation_id AND mine.account = \(account.rawValue)
                  WHERE theirs.account = a.id))
            ORDER BY a.profile_stamp, a.id LIMIT \(limit)
            """
        ).map { row throws(StorageError) in try AccountProfile(row) }
    }

    public func contacts(of account: AccountID) async throws(StorageError) -> [AccountID] {
        try await readRows(
            """
            SELECT DISTINCT theirs.account FROM conversation_member mine
            JOIN conversation_member theirs ON theirs.conversation_id = mine.conversation_id
            WHERE mine.account = \(account.rawValue)
            """
        ).map { row throws(StorageError) in AccountID(rawValue: try row.string(0)) }
    }
}

/// Each change on its account's row (refused, and nothing written, for an account that is not registered), then in
/// the same transaction the `account.updated` events built from the rows it returned, and the notices.
struct SetProfilesProcedure: SQLProcedure {
    let changes: [AccountProfileChange]
    let time: Timestamp
    /// Whether the `account.updated` events are recorded (not for an import).
    let announced: Bool
    let notices: [SQLQuery]
    private var profiles: [AccountProfile] = []
    private var pending: [SQLQuery] = []

    init(changes: [AccountProfileChange], time: Timestamp, announced: Bool, notices: [SQLQuery]) {
        self.changes = changes
        self.time = time
        self.announced = announced
        self.notices = notices
    }

    mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<[AccountProfile]> {
        if let rows, profiles.count < changes.count {
            guard let row = rows.first else { throw .accountNotFound(changes[profiles.count].account) }
            profiles.append(try AccountProfile(row))
            if profiles.count == changes.count, announced {
                pending = profiles.flatMap { profile in
                    Change.profileChanged(profile).webhookEvents.map { WebhookEventDraft.insert($0, atLeast: profile.version) }
                } + notices
            }
        }
        if profiles.count < changes.count { return .run(try Self.update(changes[profiles.count], at: time)) }
        guard pending.isEmpty else { return .run(pending.removeFirst()) }
        return .done(profiles)
    }

    /// The version of a change: the transaction's stamp, or past the version it replaces when that is higher. On
    /// PostgreSQL the stamp is the transaction's id, taken before the row's lock: a transaction that began earlier
    /// and waited for the row would write a lower one, and devices (which keep the highest version) would keep the
    /// older profile. Never below the stamp either, so the cursor's rule holds (ADR 0053).
    static let nextVersion =
        "CASE WHEN change_stamp() > profile_stamp THEN change_stamp() ELSE profile_stamp + 1 END"

    /// The fields as the change says: an absent one stays, an empty text (or `ext`) clears it.
    static func update(_ change: AccountProfileChange, at time: Timestamp) throws(StorageError) -> SQLQuery {
        let fields = change.fields
        let ext = try EntryJSON.settable(fields.ext, of: "An account")
        return """
            UPDATE account SET
                display_name = nullif(coalesce(\(fields.displayName), display_name, ''), ''),
                avatar = nullif(coalesce(\(fields.avatar), avatar, ''), ''),
                profile_ext = nullif(coalesce(\(ext), profile_ext, ''), ''),
                profile_stamp = \(unescaped: Self.nextVersion), profile_updated_at = \(time.rawValue)
            WHERE id = \(change.account.rawValue)
            RETURNING \(unescaped: AccountProfile.columns)
            """
    }
}

extension WebhookEventDraft {
    /// Records the event in the event log (ADR 0030) when an endpoint wants its type: every type but
    /// `message.undelivered` for `*`, else the types it names. Its stamp is at least `stamp` (the version of the
    /// profile it reports), so an account's queue follows its versions.
    static func insert(_ event: WebhookEventDraft, atLeast stamp: Int64) -> SQLQuery {
        let type = event.type.rawValue
        return """
            INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
            SELECT CASE WHEN change_stamp() > \(stamp) THEN change_stamp() ELSE \(stamp) END, \(event.id), \(type), \(event.conversation.rawValue), \(event.messageID?.rawValue),
                \(event.time.rawValue), \(event.payload)
            WHERE EXISTS (SELECT 1 FROM webhook_endpoint WHERE \(unescaped: WebhookEndpoint.wants("'\(type)'")))
            """
    }
}

extension AccountProfile {
    /// The columns ``init(_:)`` reads.
    static let columns = "id, display_name, avatar, profile_ext, profile_stamp, profile_updated_at"

    init(_ row: SQLRow) throws(StorageError) {
        self.init(
            account: AccountID(rawValue: try row.string(0)),
            displayName: try row.optionalString(1),
            avatar: try row.optionalString(2),
            ext: try EntryJSON.decode([String: String].self, try row.optionalString(3)),
            version: try row.int64(4),
            updatedAt: try row.optionalInt64(5).map(Timestamp.init(rawValue:))
        )
    }
}
