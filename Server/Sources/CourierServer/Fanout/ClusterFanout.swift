// Courier — Apache-2.0
internal import CourierStorage
internal import CourierWire
internal import Logging
internal import ServiceLifecycle

/// Pushes changes committed by other nodes to the devices connected to this one. A notification only names the
/// conversation and seq; the current state is read from the shared database.
struct ClusterFanout: Service {
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

    init(
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

    /// Whether `change` may concern a device connected to this node; when it cannot, nothing is read or published for
    /// it. A device that connects after this check still gets the change: it syncs once connected, and the change was
    /// committed before its notification arrived.
    func concernsLocalDevices(_ change: StoreChange) -> Bool {
        switch change.what {
        case .readState(_, let account, _), .accountChanged(let account), .deviceKicked(let account, _),
            .viewChanged(_, let account):
            registry.hasDevices(of: [account])
        case .appended(let entry, _): concernsDevices(in: entry.conversation, except: nil)
        case .appendedAt(let conversation, _, _): concernsDevices(in: conversation, except: nil)
        case .delivered(let conversation, let account, _), .read(let conversation, let account, _):
            concernsDevices(in: conversation, except: account)
        // The senders of the messages a read covered are known once their counts are read.
        case .groupRead: registry.hasDevices
        }
    }

    /// A direct conversation's members here (but `account`), or for a group (whose audience needs its member list)
    /// any device here.
    private func concernsDevices(in conversation: ConversationID, except account: AccountID?) -> Bool {
        guard let (first, second) = conversation.directMembers else { return registry.hasDevices }
        return registry.hasDevices(of: [first, second].filter { $0 != account })
    }

    /// Publishes `change` to this node's devices, deriving its events with the functions the committing node used;
    /// the database is read only for what the notification does not carry.
    func handle(_ change: StoreChange) async {
        guard concernsLocalDevices(change) else { return }
        do {
            switch change.what {
            case .appended(let entry, let membershipSeq):
                try await publish(entry, membershipSeq: membershipSeq)
            case .appendedAt(let conversation, let seq, let membershipSeq):
                guard let entry = try await store.messages(in: conversation, after: Seq(seq.rawValue - 1), limit: 1)
                    .first, entry.seq == seq
                else { return }
                try await publish(entry, membershipSeq: membershipSeq)
            case .delivered(let conversation, let account, let watermark):
                guard let publication = DeliveryService.publication(of: watermark, by: account, in: conversation)
                else { return }
                await bus.publish(publication)
            case .read(let conversation, let account, let shared):
                guard let (first, second) = conversation.directMembers else { return }
                var receipts = shared
                if receipts == nil {
                    receipts = try await store.conversation(conversation)?.receipts.first { $0.account == account }
                }
                guard let receipts else { return }
                await bus.publish(ReadService.readPublication(receipts, in: conversation, members: [first, second]))
            case .groupRead(let group, let reader, let seqs, let time, let content, let acked):
                let tallies = try await store.receiptCounts(in: group, seqs: seqs)
                let receipts = seqs.compactMap { seq in tallies[seq].map { GroupReceiptChange(seq: seq, tally: $0) } }
                let publications = ReadService.receiptPublications(
                    receipts,
                    in: group,
                    reader: reader,
                    at: time,
                    content: content.map { (text: $0, acked: Set(acked ?? [])) }
                )
                for publication in publications { await bus.publish(publication) }
            case .readState(let conversation, let account, let cause):
                let state = try await store.readState(of: account, in: conversation)
                let event = ReadStateEvent(state: state, cause: cause)
                await bus.publish(Publication(event: .readState(event), recipients: [account], excluded: nil))
            case .viewChanged(let conversation, let account):
                let view = try await store.view(of: account, in: conversation)
                let event = ViewEvent(conversation: conversation, view: view)
                await bus.publish(Publication(event: .view(event), recipients: [account], excluded: nil))
            case .accountChanged(let account):
                guard let status = try await store.accountStatus(account) else { return }
                status.endSessions(in: registry)
            case .deviceKicked(let account, let device):
                registry.end(account, for: .kicked, device: device)
            }
        } catch {
            // The change cannot be fanned out as an event: the devices it concerns sync instead, so nothing is lost.
            logger.warning("Could not read a change from another node", metadata: ["error.type": "\(type(of: error))"])
            let syncRequired = ServerFrame.event(.syncRequired(SyncRequiredEvent()))
            if let (first, second) = change.conversation?.directMembers {
                registry.send(FrameCoder().encode(syncRequired), to: [first, second], except: nil)
            } else {
                self.resync.yield()
            }
        }
    }

    /// An entry to its audience: the membership it was appended under (ADR 0023), as on the node that appended it.
    private func publish(_ entry: WireMessage, membershipSeq: Seq?) async throws {
        let appended = AppendResult(message: entry, isDuplicate: false, membershipSeq: membershipSeq)
        let recipients = try await access.audience(of: appended)
        let event = ServerEvent.message(MessageEvent(message: entry))
        await bus.publish(Publication(event: event, recipients: recipients, excluded: nil))
    }
}
