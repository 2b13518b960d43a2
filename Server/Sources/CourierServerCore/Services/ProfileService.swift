// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
package import CourierWire

/// Account profiles (ADR 0053): set by the account (`setAccountProfile`) or the app's backend (REST), told to the
/// account's devices and its contacts' as an `accountProfile` event, and read by id or as the changes since a cursor
/// (`accountProfiles`) after a device was away.
package struct ProfileService: Sendable {
    let store: any CourierStore
    let access: ConversationAccess
    let now: @Sendable () -> Timestamp

    /// The most profiles one REST call sets.
    static let maxChangesPerCall = 1000

    package func set(_ request: SetAccountProfileRequest, from device: DeviceContext) async throws(RequestError)
        -> ServiceResult<AccountProfile>
    {
        let result = try await set([AccountProfileChange(account: device.account, fields: request)], excluding: device.connection)
        return ServiceResult(ack: result.ack[0], publications: result.publications)
    }

    /// Sets every change in one transaction: each is checked first, and one that is refused (bad fields, an
    /// account that is not registered) writes none of them.
    package func set(_ changes: [AccountProfileChange], excluding connection: ConnectionID?) async throws(RequestError)
        -> ServiceResult<[AccountProfile]>
    {
        guard !changes.isEmpty, changes.count <= Self.maxChangesPerCall else {
            throw RequestError(.invalidArgument, "A call sets 1 to \(Self.maxChangesPerCall) profiles.")
        }
        var named: Set<AccountID> = []
        for change in changes {
            if let invalidity = change.fields.invalidity {
                throw RequestError(.invalidArgument, "\(change.account): \(invalidity)")
            }
            // One change per account and call: two would share one version, and a device keeps only a higher one.
            guard named.insert(change.account).inserted else {
                throw RequestError(.invalidArgument, "\(change.account) is named twice; name each account once.")
            }
        }
        let profiles = try await storing { () throws(StorageError) in
            try await store.setAccountProfiles(changes, at: now())
        }
        let publications = try await access.publications(of: profiles.map(Change.profileChanged), excluding: connection)
        return ServiceResult(ack: profiles, publications: publications)
    }

    package func profiles(_ request: AccountProfilesRequest, from device: DeviceContext) async throws(RequestError)
        -> AccountProfilesAck
    {
        if let accounts = request.accounts {
            guard request.since == nil else {
                throw RequestError(.invalidArgument, "accountProfiles names accounts or a cursor, not both.")
            }
            guard accounts.count <= AccountProfilesRequest.maxAccounts else {
                throw RequestError(.invalidArgument, "accountProfiles names at most \(AccountProfilesRequest.maxAccounts) accounts.")
            }
            do { return AccountProfilesAck(profiles: try await store.accountProfiles(of: accounts)) } catch {
                throw RequestError(error)
            }
        }
        let limit = request.limit ?? AccountProfilesRequest.maxLimit
        guard (1...AccountProfilesRequest.maxLimit).contains(limit) else {
            throw RequestError(.invalidArgument, "limit is 1 to \(AccountProfilesRequest.maxLimit).")
        }
        do {
            let now = try await store.changeCursor()
            var cursor = ProfileCursor(storeID: now.storeID, from: 0, until: now.stamp, position: nil)
            if let text = request.since, !text.isEmpty {
                guard let given = ProfileCursor(text) else {
                    throw RequestError(.invalidArgument, "since is not a cursor this server handed out.")
                }
                // A cursor of this database goes on; one of another (a restored backup) starts over.
                if given.storeID == now.storeID {
                    cursor = given.position == nil
                        ? ProfileCursor(storeID: now.storeID, from: given.from, until: now.stamp, position: nil) : given
                }
            }
            // The cursor is taken before the read: what committed before it is seen now, what commits later is
            // asked for from it next time (a profile may come twice; a device keeps the highest version).
            let page = try await store.changedProfiles(
                seenBy: device.account, from: cursor.from, after: cursor.position, limit: limit + 1
            )
            let profiles = Array(page.prefix(limit))
            guard page.count > limit, let last = profiles.last else {
                return AccountProfilesAck(
                    profiles: profiles,
                    cursor: ProfileCursor(storeID: cursor.storeID, from: cursor.until, until: cursor.until, position: nil).text
                )
            }
            let next = ProfileCursor(
                storeID: cursor.storeID, from: cursor.from, until: cursor.until,
                position: ProfilePosition(stamp: last.version, account: last.account)
            )
            return AccountProfilesAck(profiles: profiles, cursor: next.text, hasMore: true)
        } catch let error as RequestError {
            throw error
        } catch let error as StorageError {
            throw RequestError(error)
        } catch {
            throw RequestError(.internal, "\(error)")
        }
    }
}

/// `accountProfiles`' cursor: `p1.<database>.<from>` once a read is complete, `p1.<database>.<from>.<until>.<stamp>.<account>`
/// while its pages go on (the changes at or after stamp `from`, past the last one handed out; `until` is where the
/// next read starts once this one is done).
struct ProfileCursor: Hashable {
    let storeID: String
    let from: Int64
    let until: Int64
    let position: ProfilePosition?

    init(storeID: String, from: Int64, until: Int64, position: ProfilePosition?) {
        self.storeID = storeID
        self.from = from
        self.until = until
        self.position = position
    }

    init?(_ text: String) {
        guard let cursor = CursorText(text, version: "p1") else { return nil }
        storeID = cursor.store
        from = cursor.stamp
        guard let more = cursor.more else {
            until = from
            position = nil
            return
        }
        guard let until = Int64(more.0), let stamp = Int64(more.1), !more.2.isEmpty else { return nil }
        self.until = until
        position = ProfilePosition(stamp: stamp, account: AccountID(rawValue: String(more.2)))
    }

    var text: String {
        guard let position else { return "p1.\(storeID).\(from)" }
        return "p1.\(storeID).\(from).\(until).\(position.stamp).\(position.account.rawValue)"
    }
}
