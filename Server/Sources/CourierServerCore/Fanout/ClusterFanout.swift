// Courier — Apache-2.0
package import CourierStorage
internal import CourierDomain
internal import CourierWire
package import Logging
internal import ServiceLifecycle

/// Pushes changes committed by other nodes to the devices connected to this one: each notice is turned back into the
/// change (reading the shared database only for what it could not carry), whose events are derived as on the node
/// that committed it (``Change/events(of:)``).
package struct ClusterFanout: Service {
    let feed: any ChangeFeed
    let store: any CourierStore
    let access: ConversationAccess
    let bus: any EventBus
    let registry: ConnectionRegistry
    let metrics: ServerMetrics
    let hooks: CourierServerConfiguration.Hooks
    let logger: Logger
    /// Requests that every device on this node sync, folded together (see ``run()``).
    private let resyncRequests: AsyncStream<Void>
    private let resync: AsyncStream<Void>.Continuation

    package init(
        feed: any ChangeFeed,
        store: any CourierStore,
        access: ConversationAccess,
        bus: any EventBus,
        registry: ConnectionRegistry,
        metrics: ServerMetrics,
        hooks: CourierServerConfiguration.Hooks,
        logger: Logger
    ) {
        self.feed = feed
        self.store = store
        self.access = access
        self.bus = bus
        self.registry = registry
        self.metrics = metrics
        self.hooks = hooks
        self.logger = logger
        (resyncRequests, resync) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // Every device syncs at most once a second: requests meanwhile fold into one more, sent when the
                    // second is over, so a burst of failures (a database outage, a backlog overflow) costs each
                    // device one or two syncs and no request is lost.
                    group.addTask {
                        for await _ in resyncRequests {
                            registry.sendToAll(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
                            await endRestrictedSessions()
                            try await Task.sleep(for: .seconds(1))
                        }
                    }
                    try await feed.run(
                        onChange: { change in
                            await hooks.beforeFanOut?()
                            await handle(change)
                            metrics.changeFannedOut(publishedAt: change.publishedAt)
                        },
                        // Notifications may have been lost while the listener was away: every device syncs.
                        onResync: { resync.yield() }
                    )
                    group.cancelAll()
                }
            }
        } catch {
            // Stopping is how this service ends; whatever the listener threw while being cancelled is not a failure.
            guard Task.isShuttingDownGracefully || Task.isCancelled else { throw error }
        }
    }

    /// A deactivation or a revocation whose notification was lost (or could not be handled) must still end the
    /// sessions here: every connected account's status is read again, 1,000 at a time.
    private func endRestrictedSessions() async {
        let connected = registry.accounts
        for start in stride(from: 0, to: connected.count, by: 1000) {
            let chunk = Array(connected[start..<min(start + 1000, connected.count)])
            do {
                for status in try await store.restrictedAccounts(among: chunk) { status.endSessions(in: registry) }
            } catch {
                logger.warning("Could not read the status of connected accounts", metadata: ["error": "\(error)"])
                return
            }
        }
    }

    /// Whether `notice` may concern a device connected to this node; when it cannot, nothing is read or published
    /// for it. A device that connects after this check still gets the change: it syncs once connected, and the change
    /// was committed before its notification arrived.
    func concernsLocalDevices(_ notice: ChangeNotice) -> Bool {
        switch notice.content {
        case .change(.accountChanged(let account)), .change(.deviceKicked(let account, _)),
            .change(.viewChanged(_, let account, _)), .view(_, let account):
            return registry.hasDevices(of: [account])
        case .change(.appended(let entry, _, _)):
            return concernsDevices(in: entry.conversation, except: nil)
        case .entry(let conversation, _, _):
            return concernsDevices(in: conversation, except: nil)
        case .change(.delivered(let conversation, let account, _, _)):
            return concernsDevices(in: conversation, except: account)
        // A read goes to the reader's other devices, and in a group to the senders of what it counted (known once
        // their counts are read).
        case .change(.read(let read)):
            return read.own != nil && registry.hasDevices(of: [read.reader])
                || concernsDevices(in: read.conversation, except: read.reader)
        case .read(let read):
            return read.ownMoved && registry.hasDevices(of: [read.reader])
                || concernsDevices(in: read.conversation, except: read.reader)
        case .typing(let event, _):
            return concernsDevices(in: event.conversation, except: event.account)
        case .change(.reacted(let event, _, _)):
            return concernsDevices(in: event.conversation, except: nil)
        // A profile goes to the account's contacts: any device here may be one.
        case .change(.profileChanged), .profile:
            return registry.hasDevices
        }
    }

    /// A direct conversation's members here (but `account`), or for a group (whose audience needs its member list)
    /// any device here.
    private func concernsDevices(in conversation: ConversationID, except account: AccountID?) -> Bool {
        guard let (first, second) = conversation.directMembers else { return registry.hasDevices }
        return registry.hasDevices(of: [first, second].filter { $0 != account })
    }

    /// Publishes `notice`'s change to this node's devices, deriving its events with the functions the committing node
    /// used; the database is read only for what the notice does not carry.
    func handle(_ notice: ChangeNotice) async {
        guard concernsLocalDevices(notice) else { return }
        if case .typing(let event, let version) = notice.content {
            // Nothing to sync if it cannot be told: an indicator lost is one the next replaces.
            guard let recipients = try? await access.typingAudience(of: event, membershipVersion: version) else { return }
            return bus.publish(Publication(event: .typing(event), recipients: recipients, excluded: nil))
        }
        do {
            guard let change = try await change(of: notice) else { return }
            switch change {
            case .accountChanged(let account):
                guard let status = try await store.accountStatus(account) else { return }
                status.endSessions(in: registry)
            case .deviceKicked(let account, let device):
                registry.end(account, for: .kicked, device: device)
            default:
                for publication in try await access.publications(of: [change], excluding: nil) {
                    bus.publish(publication)
                }
            }
        } catch {
            // The change cannot be fanned out as an event: the devices it concerns sync instead, so nothing is lost.
            logger.warning("Could not read a change from another node", metadata: ["error.type": "\(type(of: error))"])
            let syncRequired = ServerFrame.event(.syncRequired(SyncRequiredEvent()))
            if let (first, second) = notice.conversation?.directMembers {
                registry.send(FrameCoder().encode(syncRequired), to: [first, second], except: nil)
            } else {
                self.resync.yield()
            }
        }
    }

    /// The change a notice tells, with what it could not carry read from the store; `nil` when there is nothing left
    /// to tell (an entry no longer there).
    private func change(of notice: ChangeNotice) async throws -> Change? {
        switch notice.content {
        case .change(let change):
            return change
        case .entry(let conversation, let seq, let membershipSeq):
            guard let entry = try await store.messages(in: conversation, after: Seq(seq.rawValue - 1), limit: 1).first,
                entry.seq == seq
            else { return nil }
            return .appended(entry, membershipSeq: membershipSeq, pushes: true)
        case .read(let reference):
            let (conversation, reader, seqs) = (reference.conversation, reference.reader, reference.seqs)
            // Only what a device here gets: the reader's own state for its devices, a direct read's receipts for
            // the other member's.
            let own =
                reference.ownMoved && registry.hasDevices(of: [reader])
                ? try await store.readState(of: reader, in: conversation) : nil
            var shared: MemberReceipts?
            if reference.sharedMoved, let (first, second) = conversation.directMembers,
                registry.hasDevices(of: [first, second].filter { $0 != reader })
            {
                shared = try await store.conversation(conversation)?.receipts.first { $0.account == reader }
            }
            var receipts: [ReceiptUpdate] = []
            if !seqs.isEmpty {
                let tallies = try await store.receiptCounts(in: conversation, seqs: seqs)
                receipts = seqs.compactMap { seq in tallies[seq].map { ReceiptUpdate(seq: seq, tally: $0) } }
            }
            let read = Change.Read(
                conversation: conversation, reader: reader, time: reference.time, cause: reference.cause, own: own,
                shared: shared, receipts: receipts, note: reference.note, noted: reference.noted
            )
            return .read(read)
        case .view(let conversation, let account):
            return .viewChanged(conversation, account: account, view: try await store.view(of: account, in: conversation))
        case .typing:
            return nil
        case .profile(let account):
            return try await store.accountProfiles(of: [account]).first.map(Change.profileChanged)
        }
    }
}
