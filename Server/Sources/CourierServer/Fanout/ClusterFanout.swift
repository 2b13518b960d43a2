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
        logger: Logger
    ) {
        self.feed = feed
        self.store = store
        self.access = access
        self.bus = bus
        self.registry = registry
        self.metrics = metrics
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
                            try await Task.sleep(for: .seconds(1))
                        }
                    }
                    try await feed.run(
                        onChange: { change in
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

    /// Whether `change` may concern a device connected to this node; when it cannot, nothing is read for it. A
    /// device that connects after this check still gets the change: it syncs once connected, and the change was
    /// committed before its notification arrived.
    func concernsLocalDevices(_ change: StoreChange) -> Bool {
        if change.kind == .readState, let account = change.account { return registry.hasDevices(of: [account]) }
        guard let (first, second) = change.conversation.directMembers else {
            // A group's audience needs its member list: only a node without any device skips it.
            return registry.hasDevices
        }
        switch change.kind {
        case .message: return registry.hasDevices(of: [first, second])
        case .delivered, .read: return registry.hasDevices(of: [first, second].filter { $0 != change.account })
        case .readState: return false  // without an account: nothing to publish
        }
    }

    func handle(_ change: StoreChange) async {
        guard concernsLocalDevices(change) else { return }
        do {
            if change.conversation.kind == .group {
                try await handleGroup(change)
                return
            }
            guard let (first, second) = change.conversation.directMembers else { return }
            let members = [first, second]
            switch change.kind {
            case .message:
                guard let message = try await message(at: change) else { return }
                await bus.publish(
                    Publication(event: .message(MessageEvent(message: message)), recipients: members, excluded: nil)
                )
            case .delivered:
                guard let account = change.account,
                    let receipts = try await store.conversation(change.conversation)?.receipts
                        .first(where: { $0.account == account })
                else { return }
                let event = DeliveredEvent(
                    conversation: change.conversation,
                    account: account,
                    watermark: receipts.delivered
                )
                let others = members.filter { $0 != account }
                await bus.publish(Publication(event: .delivered(event), recipients: others, excluded: nil))
            case .read:
                guard let account = change.account,
                    let receipts = try await store.conversation(change.conversation)?.receipts
                        .first(where: { $0.account == account })
                else { return }
                let event = ReadEvent(
                    conversation: change.conversation,
                    account: account,
                    watermark: receipts.read,
                    readSeqs: receipts.readSeqs
                )
                let others = members.filter { $0 != account }
                await bus.publish(Publication(event: .read(event), recipients: others, excluded: nil))
            case .readState:
                try await publishReadState(change)
            }
        } catch {
            // The change cannot be fanned out as an event: the devices it concerns sync instead, so nothing is lost.
            logger.warning("Could not read a change from another node", metadata: ["error.type": "\(type(of: error))"])
            let syncRequired = ServerFrame.event(.syncRequired(SyncRequiredEvent()))
            if let (first, second) = change.conversation.directMembers {
                registry.send(FrameCoder().encode(syncRequired), to: [first, second], except: nil)
            } else {
                self.resync.yield()
            }
        }
    }

    /// A group's changes fan out as they do on the node that committed them: log entries to the membership they
    /// were appended under (a membership change also to the accounts it names), read counts to the senders of the
    /// messages a read covered, reading positions to the reader's own devices.
    func handleGroup(_ change: StoreChange) async throws {
        switch change.kind {
        case .message:
            guard let message = try await message(at: change) else { return }
            let appended = AppendResult(message: message, isDuplicate: false, membershipSeq: change.membershipSeq)
            let recipients = try await access.audience(of: appended)
            await bus.publish(
                Publication(event: .message(MessageEvent(message: message)), recipients: recipients, excluded: nil)
            )
        case .read:
            guard let reader = change.account, let seqs = change.receipts, let time = change.time else { return }
            let tallies = try await store.receiptCounts(in: change.conversation, seqs: seqs)
            let receipts = seqs.compactMap { seq in tallies[seq].map { GroupReceiptChange(seq: seq, tally: $0) } }
            let publications = ReadService.receiptPublications(
                receipts,
                in: change.conversation,
                reader: reader,
                at: time,
                content: change.content.map { (text: $0, acked: Set(change.acked ?? [])) }
            )
            for publication in publications { await bus.publish(publication) }
        case .readState:
            try await publishReadState(change)
        case .delivered:
            break  // Group delivery receipts are queried, not pushed.
        }
    }

    private func message(at change: StoreChange) async throws -> WireMessage? {
        let after = Seq(change.seq.rawValue - 1)
        guard let message = try await store.messages(in: change.conversation, after: after, limit: 1).first,
            message.seq == change.seq
        else { return nil }
        return message
    }

    private func publishReadState(_ change: StoreChange) async throws {
        guard let account = change.account else { return }
        let state = try await store.readState(of: account, in: change.conversation)
        let event = ReadStateEvent(state: state, cause: change.cause ?? .message)
        await bus.publish(Publication(event: .readState(event), recipients: [account], excluded: nil))
    }
}
