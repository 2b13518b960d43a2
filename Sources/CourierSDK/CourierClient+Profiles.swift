// Courier — Apache-2.0
internal import Foundation
public import CourierWire

extension CourierClient {
    /// Changes your profile (ADR 0053): the fields given are set, an empty text (or an empty `ext`) clears its field,
    /// the others stay. Your other devices and every account you share a conversation with get it
    /// (``CourierEvent/profileChanged(_:)``), live or when they next connect; ``Message/senderProfile`` and
    /// ``Conversation/peerProfile`` show it.
    ///
    /// NIM `updateMyUserInfo:completion:`, Agora `updateOwnUserInfo:completion:`, RongCloud: your backend's
    /// `user/refresh` (your backend may also set it: `PUT /v1/accounts/{account}/profile`).
    ///
    /// - Parameters:
    ///   - displayName: At most 100 characters.
    ///   - avatar: Where your picture is (at most 2,048 bytes): an `https` address of your app's storage, or the
    ///     address ``uploadAvatar(_:)`` returns (a file every account may fetch, kept while your profile names it).
    ///   - ext: Key-values of your app's own, within a message's `ext` limits.
    /// - Returns: Your profile after the change.
    /// - Throws: ``CourierError/invalidInput(code:message:)`` for a field past its limit or no field at all;
    ///   ``CourierError/notConnected``.
    @discardableResult
    public func setProfile(
        displayName: String? = nil,
        avatar: String? = nil,
        ext: [String: String]? = nil
    ) async throws -> AccountProfile {
        let request = SetAccountProfileRequest(displayName: displayName, avatar: avatar, ext: ext)
        guard case .setAccountProfile(let profile) = try await requestAck({ .setAccountProfile($0, request) }) else {
            throw CourierError.unexpectedReply
        }
        try await received([profile])
        return profile
    }

    /// Uploads a picture for your profile to the server (a file of your account's own, which every account may fetch
    /// and the server keeps while your profile names it) and returns its address for ``setProfile(displayName:avatar:ext:)``:
    ///
    /// ```swift
    /// let avatar = try await client.uploadAvatar(Attachment(url: pickedFile, mimeType: "image/jpeg"))
    /// try await client.setProfile(avatar: avatar)
    /// ```
    ///
    /// NIM: `uploadFile:progress:completion:` (NOS) then `updateMyUserInfo:`; Agora: your own upload, then
    /// `updateOwnUserInfo:`.
    ///
    /// - Parameter picture: A file on this device (`file:` URL) and its type.
    /// - Throws: ``CourierError/notConnected`` before the client connected (the upload needs the account's token);
    ///   ``CourierError/uploadFailed(_:)`` when the server refused it (a type it does not store, a file too large).
    public func uploadAvatar(_ picture: Attachment) async throws -> String {
        let account = try boundAccount()
        let uploader = CourierMediaUploader(
            serverURL: configuration.serverURL,
            path: "/v1/accounts/\(account.rawValue)/media",
            token: { [state] in
                guard let credentials = state.withLock({ $0.credentials }) else { throw CourierError.notConnected }
                return try await credentials.token()
            }
        )
        do {
            return try await uploader.upload(picture) { _ in }.absoluteString
        } catch let error as CourierError {
            throw error
        } catch {
            throw CourierError.uploadFailed("\(error)")
        }
    }

    /// The profile this device holds of `account` (yours, a contact's, or one fetched with ``fetchProfiles(of:)``),
    /// offline; `nil` when it has heard of none.
    public func profile(of account: AccountID) async throws -> AccountProfile? {
        try await store.profiles(of: [account])[account]
    }

    /// Fetches the profiles of up to 500 accounts from the server (any account, not only your contacts: NIM
    /// `fetchUserInfos:completion:`, Agora `fetchUserInfoById:completion:`) and keeps them on this device. Accounts
    /// that do not exist are left out.
    @discardableResult
    public func fetchProfiles(of accounts: [AccountID]) async throws -> [AccountProfile] {
        let request = AccountProfilesRequest(accounts: accounts)
        guard case .accountProfiles(let page) = try await requestAck({ .accountProfiles($0, request) }) else {
            throw CourierError.unexpectedReply
        }
        try await received(page.profiles)
        return page.profiles
    }

    /// Pages the changes to your and your contacts' profiles since the cursor held (every one ever set on a new
    /// install), keeping each page and its cursor in one transaction: run after each connect, so that what changed
    /// while this device was away is here.
    func syncProfiles(on link: Link) async throws {
        var since = try await store.profileCursor()
        while true {
            let reply = try await link.request { .accountProfiles($0, AccountProfilesRequest(since: since)) }
            // A server from before profiles: nothing to catch up on.
            if case .failure(let error) = reply, error.code == .frameUnknownType { return }
            guard case .accountProfiles(let ack) = try reply.ack() else { throw CourierError.unexpectedReply }
            for profile in try await store.store(ack.profiles, cursor: ack.cursor) {
                broadcaster.emit(.profileChanged(profile))
            }
            since = ack.cursor
            guard ack.hasMore else { return }
        }
    }

    /// Fetches by id the profiles of the accounts this device holds messages or conversations of but no profile (new
    /// contacts: their profiles changed before they became contacts, so no cursor brings them), 500 at a time. An
    /// account that never set one is kept as such (version 0), and not asked for again.
    func fetchMissingProfiles(on link: Link) async throws {
        var asked: Set<AccountID> = []
        while true {
            let missing = try await store.accountsLackingProfiles(limit: AccountProfilesRequest.maxAccounts)
                .filter { !asked.contains($0) }
            guard !missing.isEmpty else { return }
            asked.formUnion(missing)
            let reply = try await link.request { .accountProfiles($0, AccountProfilesRequest(accounts: missing)) }
            if case .failure(let error) = reply, error.code == .frameUnknownType { return }
            guard case .accountProfiles(let ack) = try reply.ack() else { throw CourierError.unexpectedReply }
            try await received(ack.profiles)
        }
    }

    /// Profiles from the server (an event, an ack): kept when newer than those held, and told.
    func received(_ profiles: [AccountProfile]) async throws {
        for profile in try await store.store(profiles) { broadcaster.emit(.profileChanged(profile)) }
    }
}
