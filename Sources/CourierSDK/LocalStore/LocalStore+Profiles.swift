// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// Account profiles as this device last heard of them (ADR 0053): its own, its contacts', and any it fetched by id.
/// A profile replaces the one held only when its version is higher, so an event and a page that cross keep the newer.
extension LocalStore {
    /// Stores `profiles`; returns those that were newer than what was held (and were ever set).
    func store(_ profiles: [AccountProfile]) async throws(CourierError) -> [AccountProfile] {
        guard !profiles.isEmpty else { return [] }
        return try await write { db in try Self.store(db, profiles) }
    }

    /// Stores `profiles` and, in the same transaction, the cursor of the page that brought them.
    func store(_ profiles: [AccountProfile], cursor: String?) async throws(CourierError) -> [AccountProfile] {
        try await write { db in
            let changed = try Self.store(db, profiles)
            if let cursor {
                try db.execute(
                    sql: "INSERT INTO metadata (key, value) VALUES ('profileCursor', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    arguments: [cursor]
                )
            }
            return changed
        }
    }

    static func store(_ db: Database, _ profiles: [AccountProfile]) throws -> [AccountProfile] {
        var changed: [AccountProfile] = []
        for profile in profiles {
            try db.execute(
                sql: """
                    INSERT INTO accountProfile (account, displayName, avatar, ext, version, updatedAt)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                    ON CONFLICT (account) DO UPDATE SET displayName = ?2, avatar = ?3, ext = ?4, version = ?5, updatedAt = ?6
                    WHERE excluded.version > accountProfile.version
                    """,
                arguments: [
                    profile.account.rawValue, profile.displayName, profile.avatar, Self.json(ext: profile.ext),
                    profile.version, profile.updatedAt?.rawValue,
                ]
            )
            // A profile never set (version 0, fetched for a new contact) is kept, so that it is not asked for again,
            // but is no change to tell.
            if db.changesCount > 0, profile.version > 0 { changed.append(profile) }
        }
        return changed
    }

    /// Where the next `accountProfiles` read starts; `nil` before the first.
    func profileCursor() async throws(CourierError) -> String? {
        try await read { db in try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE key = 'profileCursor'") }
    }

    /// Whether this device holds no profile of `account` (not even that it never set one).
    func lacksProfile(_ account: AccountID) async throws(CourierError) -> Bool {
        try await read { db in
            try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM accountProfile WHERE account = ?)", arguments: [account.rawValue]) ?? false)
        }
    }

    /// Up to `limit` accounts this device holds messages or direct conversations of, but no profile.
    func accountsLackingProfiles(limit: Int) async throws(CourierError) -> [AccountID] {
        try await read { db in
            var accounts = try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT sender FROM message
                    WHERE sender NOT IN (SELECT account FROM accountProfile) LIMIT ?
                    """,
                arguments: [limit]
            )
            var seen = Set(accounts)
            for members in try String.fetchAll(db, sql: "SELECT members FROM conversation WHERE kind = 'direct'") {
                for member in members.split(separator: ",").map(String.init) where seen.insert(member).inserted {
                    accounts.append(member)
                }
            }
            let held = Set(try String.fetchAll(db, sql: "SELECT account FROM accountProfile"))
            return accounts.filter { !held.contains($0) }.prefix(limit).map(AccountID.init(rawValue:))
        }
    }

    /// The profiles held of `accounts` (those this device heard of), by account.
    func profiles(of accounts: [AccountID]) async throws(CourierError) -> [AccountID: AccountProfile] {
        try await read { db in try Self.profiles(db, of: accounts) }
    }

    static func profiles(_ db: Database, of accounts: [AccountID]) throws -> [AccountID: AccountProfile] {
        guard !accounts.isEmpty else { return [:] }
        let placeholders = Array(repeating: "?", count: accounts.count).joined(separator: ", ")
        var found: [AccountID: AccountProfile] = [:]
        for row in try Row.fetchAll(
            db,
            sql: "SELECT \(profileColumns) FROM accountProfile WHERE account IN (\(placeholders))",
            arguments: StatementArguments(accounts.map(\.rawValue))
        ) {
            if let profile = profile(row, at: 0) { found[profile.account] = profile }
        }
        return found
    }

    /// The columns ``profile(_:at:)`` reads.
    static let profileColumns = "account, displayName, avatar, ext, version, updatedAt"

    /// A profile from ``profileColumns`` at `column` (of a join that found none: `nil`).
    static func profile(_ row: Row, at column: Int) -> AccountProfile? {
        guard let account = row[column] as String? else { return nil }
        return AccountProfile(
            account: AccountID(rawValue: account),
            displayName: row[column + 1],
            avatar: row[column + 2],
            ext: ext(fromJSON: row[column + 3]),
            version: row[column + 4],
            updatedAt: (row[column + 5] as Int64?).map(Timestamp.init(milliseconds:))
        )
    }
}
