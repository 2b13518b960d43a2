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
    let logger: Logger

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await feed.run(
                    onChange: { change in await handle(change) },
                    onResync: {
                        // Notifications may have been lost while the listener was away: every device syncs.
                        registry.sendToAll(ServerFrame.event(.syncRequired(SyncRequiredEvent())))
                    }
                )
            }
        } catch {
            // Stopping is how this service ends; whatever the listener threw while being cancelled is not a failure.
            guard Task.isShuttingDownGracefully || Task.isCancelled else { throw error }
        }
    }

    func handle(_ change: StoreChange) async {
        // Groups on PostgreSQL are not ported yet (the store refuses them); only direct conversations fan out.
        guard let (first, second) = change.conversation.directMembers else { return }
        let members = [first, second]
        do {
            switch change.kind {
            case .message:
                let after = Seq(change.seq.rawValue - 1)
                guard let message = try await store.messages(in: change.conversation, after: after, limit: 1).first,
                    message.seq == change.seq
                else { return }
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
                guard let account = change.account else { return }
                let state = try await store.readState(of: account, in: change.conversation)
                let event = ReadStateEvent(state: state, cause: change.cause ?? .message)
                await bus.publish(Publication(event: .readState(event), recipients: [account], excluded: nil))
            }
        } catch {
            logger.warning("Could not read a change from another node", metadata: ["error.type": "\(type(of: error))"])
        }
    }
}
