// Courier — Apache-2.0
internal import Foundation
internal import Logging
public import CourierWire

extension CourierClient {
    /// Connects as `account` and keeps the connection up, reconnecting with backoff and catching up after each
    /// reconnect, until ``disconnect()``.
    ///
    /// Returns once the device is authenticated and caught up (the local store holds everything the server has for
    /// it). Equivalent to NIM `login`, Agora `loginWithUsername:token:`, RongCloud `connectWithToken`.
    ///
    /// When the token expires the session ends and the client stops; to renew tokens as they expire, connect with
    /// ``connect(account:tokenProvider:)``.
    ///
    /// - Parameters:
    ///   - account: The account id; it must be the token's subject.
    ///   - token: A client token minted by your backend (JWT HS256 with the app secret).
    /// - Throws: ``CourierError/unauthorized(_:)`` when the server refuses the token (the client stops);
    ///   ``CourierError/timedOut`` when no connection succeeded within `connectTimeout` (the client keeps trying in
    ///   the background); ``CourierError/localStore(_:)`` when the store belongs to another account.
    public func connect(account: AccountID, token: String) async throws {
        try await start(account: account, credentials: Credentials(token: token))
    }

    /// Connects as `account` with tokens from `tokenProvider`, your call to your backend, and renews them: the SDK
    /// asks for a fresh token when it first connects, when the server ends a session because its token expired
    /// (`auth.tokenExpired`) or the app's backend revoked it (`auth.tokenRevoked`), and when the server refuses a
    /// token (`auth.invalidToken`), then reconnects with backoff. A deactivated account (`auth.accountDeactivated`)
    /// keeps trying with backoff, and is back once the account is reactivated.
    /// The outbox and read acks queued meanwhile go out once, on the new connection.
    ///
    /// Equivalent to Agora's `tokenWillExpire:` / `tokenDidExpire:` (`AgoraChatClientDelegate`) with `renewToken:`,
    /// and RongCloud's `RC_CONN_TOKEN_INCORRECT` / `RC_CONN_TOKEN_EXPIRE` handling, done for you.
    ///
    /// - Parameters:
    ///   - account: The account id; it must be the tokens' subject.
    ///   - tokenProvider: Returns a fresh client token for the account. When it throws (your backend is unreachable,
    ///     say), the attempt counts as a failed connection and is retried with backoff; call ``disconnect()`` to stop,
    ///     for instance when the user signed out. When the server refuses three fresh tokens in a row, the client stops
    ///     with ``ConnectionState/disconnected(_:)`` carrying ``CourierError/unauthorized(_:)``.
    /// - Throws: as ``connect(account:token:)``.
    public func connect(account: AccountID, tokenProvider: @escaping TokenProvider) async throws {
        try await start(account: account, credentials: Credentials(account: account, provider: tokenProvider))
    }

    /// Returns a fresh client token for an account (see ``connect(account:tokenProvider:)``).
    public typealias TokenProvider = @Sendable (AccountID) async throws -> String

    private func start(account: AccountID, credentials: Credentials) async throws {
        guard account.isValid else {
            throw CourierError.invalidInput(code: .invalidArgument, message: "Invalid account id.")
        }
        try store.bind(to: account)
        let device: DeviceID
        if let configured = configuration.deviceID { device = configured } else { device = try await store.deviceID() }
        let attempt = state.withLock { state -> Int? in
            guard state.runTask == nil else { return nil }
            state.account = account
            state.credentials = credentials
            state.connectAttempt += 1
            let attempt = state.connectAttempt
            connectWaiters.register(attempt)
            // Created under the lock, so the task's own cleanup (below, in `run`) cannot run before it is recorded.
            state.runTask = Task {
                await self.run(account: account, device: device, credentials: credentials, attempt: attempt)
            }
            return attempt
        }
        guard let attempt else { return }
        accountBecameKnown(account)
        do {
            try await connectWaiters.wait(
                for: attempt,
                timeout: configuration.connectTimeout,
                clock: configuration.clock
            )
        } catch {
            if case CourierError.unauthorized = error { await disconnect() }
            throw error
        }
    }

    /// Reconnects now if the client is waiting out its reconnect backoff (which can reach
    /// ``Configuration/reconnectBackoff``'s maximum, 30 s by default), and starts the backoff over: call it when the
    /// app comes to the foreground or the network comes back (`NWPathMonitor`). Connected, connecting or
    /// disconnected, it changes nothing (asked for while a connection is being made, that connection answers it).
    ///
    /// Equivalent to reconnecting on `UIApplication.willEnterForegroundNotification` yourself; NIM, Agora and
    /// RongCloud do it inside their SDKs.
    public func reconnectNow() {
        switch connectionState {
        case .waitingToReconnect, .connecting: reconnectWakeup.signal()
        case .connected, .disconnected: break
        }
    }

    /// Closes the connection and stops reconnecting. Waits until the client's tasks have ended.
    public func disconnect() async {
        let task = state.withLock { state -> Task<Void, Never>? in
            defer { state.runTask = nil }
            return state.runTask
        }
        task?.cancel()
        await task?.value
        // Uploads stop too; their messages stay queued and are uploaded again after the next connect.
        let uploads = state.withLock { $0.uploads.values }
        for upload in uploads { upload.cancel() }
        for upload in uploads { await upload.value }
        if case .disconnected = connectionState {} else { setConnectionState(.disconnected(nil)) }
    }

    /// The client's one task tree: the delegate pump and the connection loop.
    private func run(account: AccountID, device: DeviceID, credentials: Credentials, attempt: Int) async {
        let pump = broadcaster.makeQueue()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { @Sendable in
                while let event = await pump.next() { await self.delegates.dispatch(event, from: self) }
            }
            await connectionLoop(account: account, device: device, credentials: credentials, attempt: attempt)
            broadcaster.removeQueue(pump)
            await group.waitForAll()
        }
        // The loop ended by itself (refused token): let a later `connect` start afresh.
        state.withLock { state in
            if state.connectAttempt == attempt { state.runTask = nil }
        }
    }

    private func connectionLoop(account: AccountID, device: DeviceID, credentials: Credentials, attempt: Int) async {
        var failures = 0
        var refusals = 0
        let urls = [configuration.serverURL] + configuration.alternateServerURLs
        var urlIndex = 0
        while !Task.isCancelled {
            setConnectionState(.connecting)
            let link = Link(timeout: configuration.requestTimeout, clock: configuration.clock)
            let established = Locked(false)
            do {
                let token = try await credentials.token()
                try await configuration.transport.run(
                    url: urls[urlIndex],
                    receive: { text in await self.receive(text, on: link, me: account, credentials: credentials) },
                    session: { sender in
                        link.attach(sender)
                        try await self.session(on: link, account: account, device: device, token: token) {
                            established.withLock { $0 = true }
                            self.connectWaiters.resolve(attempt, with: .success(()))
                        }
                    }
                )
            } catch CourierError.unauthorized(let message) {
                refusals += 1
                // A provider's token may be refused once (it expired in flight, a key rotated): ask for another.
                if credentials.canRenew, refusals < Credentials.maximumRefusals {
                    credentials.expire()
                } else {
                    closeLink(link)
                    setConnectionState(.disconnected(.unauthorized(message)))
                    connectWaiters.resolve(attempt, with: .failure(CourierError.unauthorized(message)))
                    return
                }
            } catch {
                configuration.logger.debug("Connection ended", metadata: ["error.type": "\(type(of: error))"])
            }
            closeLink(link)
            guard !Task.isCancelled else { break }
            let wasEstablished = established.withLock { $0 }
            failures = wasEstablished ? 0 : failures + 1
            if wasEstablished { refusals = 0 }
            // A connection that dropped is retried where it was; an attempt that failed moves to the next node.
            if !wasEstablished { urlIndex = (urlIndex + 1) % urls.count }
            setConnectionState(.waitingToReconnect)
            let delay = configuration.reconnectBackoff.delay(attempt: failures, jitter: Double.random(in: 0.5...1))
            // The backoff, or until the app asks to reconnect now (it came to the foreground): then the backoff
            // starts over.
            let (clock, wakeup) = (configuration.clock, reconnectWakeup)
            let woken = await withTaskGroup(of: Bool.self) { race -> Bool in
                race.addTask {
                    try? await clock.sleep(for: delay, tolerance: nil)
                    return false
                }
                race.addTask {
                    await wakeup.wait()
                    return !Task.isCancelled
                }
                let first = await race.next() ?? false
                race.cancelAll()
                return first
            }
            if woken { failures = 0 }
        }
        setConnectionState(.disconnected(nil))
    }

    private func closeLink(_ link: Link) {
        link.close()
        state.withLock { state in
            if state.link === link { state.link = nil }
        }
    }

    /// One connection's life: authenticate, catch up, then serve the outbox, receipts and resyncs until it closes.
    private func session(
        on link: Link,
        account: AccountID,
        device: DeviceID,
        token: String,
        onEstablished: @Sendable () -> Void
    ) async throws {
        let asked = Date()
        let reply = try await link.request {
            .connect($0, ConnectRequest(token: token, account: account, device: device))
        }
        let answered = Date()
        guard case .connect(let ack) = try reply.ack() else { throw CourierError.unexpectedReply }
        state.withLock {
            $0.limits = ack.limits
            $0.readReceiptPolicy = ack.readReceiptPolicy
            let middle = (asked.timeIntervalSince1970 + answered.timeIntervalSince1970) / 2
            $0.serverClockOffset = ack.serverTime.rawValue - Int64((middle * 1000).rounded())
            $0.link = link
        }
        try await resync(on: link, me: account)
        do {
            try await flushPushToken(on: link)
        } catch let error as CourierError where error != .notConnected {
            configuration.logger.info("Push token refused", metadata: ["courier.error": "\(error.code)"])
        }
        if configuration.sendsDeliveryReceipts { link.noteReceipts(try await store.dueDeliveryReceipts(me: account)) }
        setConnectionState(.connected)
        // A reconnectNow() asked for while this connection was being made is answered by it.
        reconnectWakeup.clear()
        onEstablished()
        repeat {
            let work = link.takeWork()
            if work.needsResync {
                try await resync(on: link, me: account)
            } else if work.needsCheckpoint {
                // Online all along: receipt counts came live, only the cursor moves.
                try await resync(on: link, me: account, refreshingReceiptCounts: false)
            } else if !work.gaps.isEmpty {
                try await fillGaps(work.gaps, on: link, me: account)
            }
            if work.needsProfiles { try await fetchMissingProfiles(on: link) }
            // Receipts first: they are tiny, and a peer learns of a delivery before anything this device sends later.
            if !work.receipts.isEmpty { try await sendDeliveryReceipts(work.receipts, on: link) }
            try await flushReads(on: link, me: account)
            try await flushViewChanges(on: link, me: account)
            try await flushOutbox(on: link, me: account)
            if link.hasPendingReceipts {
                try await configuration.clock.sleep(for: configuration.deliveryReceiptInterval, tolerance: nil)
                continue
            }
        } while await link.waitForWork()
        throw CourierError.notConnected
    }

    /// Pages `sync` until the server has nothing more for this device. After a first completed sync, a sync asks
    /// for what changed since the previous one ended (ADR 0017): it names no conversation, and costs what changed
    /// while the device was away, not the number of conversations it holds.
    func resync(on link: Link, me: AccountID, refreshingReceiptCounts: Bool = true) async throws {
        // A new install asks for recent entries only, until its first sync completes (ADR 0009).
        let recent = try await store.hasCompletedSync() ? nil : configuration.initialSyncLimit.map { max(1, $0) }
        let resumes = try await store.syncCursor()
        var since = resumes
        // Without a cursor to resume from, the device names what it holds (when the sync begins: the pages after the
        // first continue from the ack's `since`, which carries where the sync stands, so a new install's requests stay
        // small however many conversations it is in); with one, only the conversations that got entries outside a
        // sync since (live, or its own sends), so that those are not sent again.
        let held = resumes == nil ? try await store.cursors() : [:]
        while true {
            let cursors = resumes == nil ? held : try await store.cursors(heldLiveOnly: true)
            let reply = try await link.request { .sync($0, SyncRequest(cursors: cursors, recent: recent, since: since)) }
            if case .failure(let error) = reply, error.code == .syncCursorInvalid, resumes != nil || !held.isEmpty {
                // Another database answers (a restored backup, a move between backends), or one that lacks entries
                // this device holds (a snapshot put back, a failover): what it holds may not be there, or be another
                // message at the same seq. Start over from what that database holds; unsent messages and reads stay
                // and go out after the sync. Once started over it names nothing, so it is not refused again.
                configuration.logger.notice("The server's database changed (sync.cursorInvalid): syncing from scratch")
                try await store.forgetServerState()
                return try await resync(on: link, me: me, refreshingReceiptCounts: refreshingReceiptCounts)
            }
            guard case .sync(let ack) = try reply.ack() else { throw CourierError.unexpectedReply }
            try await store.apply(ack, me: me, then: publisher(for: link))
            since = ack.since
            guard ack.hasMore, !ack.messages.isEmpty else {
                if recent != nil { try await store.markSyncCompleted() }
                if refreshingReceiptCounts {
                    try await refreshReceiptCounts(on: link, me: me)
                    try await syncProfiles(on: link)
                    try await fetchMissingProfiles(on: link)
                }
                return
            }
        }
    }

    /// Fills the gaps live events left (two commits that raced published out of order) with one `history` request
    /// per conversation, for the entries missing there: a reordering costs what is missing, not a sync of every
    /// conversation. A gap that history does not fill — wider than a page, or before the part of a
    /// group's log this member may see — or a refused request falls back to a full sync.
    func fillGaps(_ conversations: Set<ConversationID>, on link: Link, me: AccountID) async throws {
        let pageSize = state.withLock { $0.limits?.maxPageSize } ?? 100
        for conversation in conversations.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let gap = try await store.gap(in: conversation) else { continue }
            let missing = Int(gap.before.rawValue - gap.after.rawValue - 1)
            guard missing <= pageSize else { return link.requestResync() }
            let reply = try await link.request {
                .history($0, HistoryRequest(conversation: conversation, before: gap.before, limit: missing))
            }
            switch reply {
            case .success(.history(let ack)):
                // Live entries that came late: stored and announced as any live entry.
                try await store.apply(ack.messages, arrival: .online, me: me, then: publisher(for: link))
                if try await store.gap(in: conversation)?.after == gap.after { return link.requestResync() }
            case .failure: return link.requestResync()
            default: throw CourierError.unexpectedReply
            }
        }
    }

    /// Asks the server for the counts of your recent group messages not yet read by everyone: new readers announced
    /// while this device was away reach it no other way (a sync carries the log, not receipt counts). A message whose
    /// count moved is reported with the readers new to this device (its read list, up to 1,000 readers), not an
    /// empty list: an app that merges each update's readers, as RongCloud's guide advises, has them all.
    private func refreshReceiptCounts(on link: Link, me: AccountID) async throws {
        for (group, messages) in try await store.incompleteReceiptCounts(me: me, limit: 100) {
            let reply = try await link.request {
                .receiptCounts($0, ReceiptCountsRequest(conversation: group, messageIDs: messages))
            }
            switch reply {
            case .success(.receiptCounts(let ack)):
                for count in try await store.store(ack.counts, in: group) {
                    let readers = try await readList(of: count.messageID, in: group, on: link)
                    try await store.storeReaders(readers, of: count, in: group, then: publisher(for: link))
                }
            case .failure(let error):
                // No longer a member, say: the counts stay as last heard.
                configuration.logger.debug("Receipt counts refused", metadata: ["courier.error": "\(error.code)"])
            default:
                throw CourierError.unexpectedReply
            }
        }
    }

    /// A group message's read list, page by page, up to `limit` readers (fewer when the server refuses a page).
    private func readList(
        of message: MessageID,
        in group: ConversationID,
        on link: Link,
        limit: Int = 1000
    ) async throws -> [ReceiptListEntry] {
        var entries: [ReceiptListEntry] = []
        var cursor: String?
        repeat {
            let request = ReceiptListRequest(conversation: group, messageID: message, list: .read, cursor: cursor, limit: 100)
            guard case .success(.receiptList(let page)) = try await link.request({ .receiptList($0, request) }) else { break }
            entries += page.entries
            cursor = page.nextCursor
        } while cursor != nil && entries.count < limit
        return entries
    }

    private func sendDeliveryReceipts(_ receipts: [ConversationID: Seq], on link: Link) async throws {
        for (conversation, seq) in receipts.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let reply = try await link.request { .deliver($0, DeliverRequest(conversation: conversation, seq: seq)) }
            switch reply {
            case .success: try await store.markDeliveryAcknowledged(conversation, upTo: seq)
            case .failure(let error):
                configuration.logger.debug("Delivery receipt refused", metadata: ["courier.error": "\(error.code)"])
            }
        }
    }

    /// Emits the events a store transaction reported and schedules its follow-up work (called at commit).
    func publisher(for link: Link?) -> LocalStore.Publish {
        let broadcaster = self.broadcaster
        let sendsReceipts = configuration.sendsDeliveryReceipts
        return { changes in
            broadcaster.emit(changes.events)
            if sendsReceipts { link?.noteReceipts(changes.receiptsDue) }
            link?.requestGapFill(changes.gaps)
        }
    }

    /// Handles one frame from the server: acks and errors go to their requests, events into the store.
    private func receive(_ text: String, on link: Link, me: AccountID, credentials: Credentials) async {
        let frame: ServerFrame
        do {
            frame = try link.coder.decodeServerFrame(text)
        } catch {
            configuration.logger.debug("Ignoring an undecodable frame")
            return
        }
        switch frame {
        case .ack(let id, let ack): link.resolve(id, .success(ack))
        case .error(let id?, let error): link.resolve(id, .failure(error))
        case .error(nil, let error):
            configuration.logger.debug("Server error", metadata: ["courier.error": "\(error.code)"])
            // The server closes the connection next; the reconnect asks the provider for a fresh token.
            if error.code == .authTokenExpired || error.code == .authTokenRevoked { credentials.expire() }
        case .event(let event):
            switch event {
            // Nothing stored comes with these: no checkpoint sync is due for them.
            case .syncRequired, .typing, .accountProfile, .reaction: break
            default: link.noteLiveTraffic(checkpointAfter: configuration.syncCheckpointInterval)
            }
            do {
                switch event {
                case .message(let payload):
                    typingEnded(by: [payload.message])
                    try await store.apply([payload.message], arrival: .online, me: me, then: publisher(for: link))
                    // A new contact: its profile is asked for by the session loop (never here, on the reader).
                    let sender = payload.message.sender
                    if !profilesHeld.withLock({ $0.contains(sender) }) {
                        if try await store.lacksProfile(sender) {
                            link.requestProfiles()
                        } else {
                            profilesHeld.withLock { _ = $0.insert(sender) }
                        }
                    }
                case .delivered(let payload): try await store.apply(payload, me: me, then: publisher(for: link))
                case .read(let payload): try await store.apply(payload, me: me, then: publisher(for: link))
                case .readState(let payload): try await store.apply(payload, me: me, then: publisher(for: link))
                case .groupReceipts(let payload): try await store.apply(payload, then: publisher(for: link))
                case .view(let payload): try await store.apply(payload, me: me, then: publisher(for: link))
                case .typing(let payload): receive(payload)
                case .accountProfile(let payload): try await received([payload])
                case .reaction(let payload): try await store.apply(payload, me: me, then: publisher(for: link))
                case .syncRequired: link.requestResync()
                }
            } catch {
                // Not dropped: the store is the truth, and a sync brings it up to date with what the event said.
                configuration.logger.info("Could not store an event", metadata: ["error.type": "\(type(of: error))"])
                link.requestResync()
            }
        }
    }
}
