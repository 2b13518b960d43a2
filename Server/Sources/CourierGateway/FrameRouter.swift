// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Logging
package import CourierServerCore

/// Dispatches one decoded request of an authenticated device to its service, and maps the outcome to exactly one
/// `ack` or `error` frame. The only place where errors become frames.
package struct FrameRouter: Sendable {
    let messages: MessageService
    let deliveries: DeliveryService
    let reads: ReadService
    let recalls: RecallService
    let edits: EditService
    let reactions: ReactionService
    let groups: GroupService
    let pushTokens: PushTokenService
    let views: ViewService
    let typing: TypingService
    let profiles: ProfileService
    let now: @Sendable () -> Timestamp

    package init(services: CourierServices, now: @escaping @Sendable () -> Timestamp) {
        messages = services.messages
        deliveries = services.deliveries
        reads = services.reads
        recalls = services.recalls
        edits = services.edits
        reactions = services.reactions
        groups = services.groups
        pushTokens = services.pushTokens
        views = services.views
        typing = services.typing
        profiles = services.profiles
        self.now = now
    }

    /// The reply to queue, and the events to publish after it. `place`: the request's place in the store's commit order
    /// (``StorePlace``).
    func handle(
        _ frame: ClientFrame,
        from device: DeviceContext,
        logger: Logger,
        place: StorePlace = StorePlace()
    ) async
        -> (reply: ServerFrame, publications: [Publication])
    {
        let id = frame.requestID
        do throws(RequestError) {
            switch frame {
            case .send(_, let request):
                let result = try await messages.send(request, from: device, whenQueued: place.queued)
                return (.ack(id, .send(result.ack)), result.publications)
            case .sync(_, let request):
                return (.ack(id, .sync(try await messages.sync(request, from: device))), [])
            case .history(_, let request):
                return (.ack(id, .history(try await messages.history(request, from: device))), [])
            case .deliver(_, let request):
                let result = try await deliveries.deliver(request, from: device)
                return (.ack(id, .deliver(result.ack)), result.publications)
            case .read(_, let request):
                let result = try await reads.read(request, from: device, place: place)
                return (.ack(id, .read(result.ack)), result.publications)
            case .readReceiptSettings(_, let request):
                return (.ack(id, .readReceiptSettings(try await reads.settings(request, from: device))), [])
            case .unread:
                return (.ack(id, .unread(try await reads.unread(from: device))), [])
            case .recall(_, let request):
                let result = try await recalls.recall(request, from: device)
                return (.ack(id, .recall(result.ack)), result.publications)
            case .edit(_, let request):
                let result = try await edits.edit(request, from: device)
                return (.ack(id, .edit(result.ack)), result.publications)
            case .react(_, let request):
                let result = try await reactions.react(request, from: device)
                return (.ack(id, .react(result.ack)), result.publications)
            case .reactions(_, let request):
                return (.ack(id, .reactions(try await reactions.reactions(request, from: device))), [])
            case .reactionList(_, let request):
                return (.ack(id, .reactionList(try await reactions.list(request, from: device))), [])
            case .createGroup(_, let request):
                let result = try await groups.create(request, from: device)
                return (.ack(id, .createGroup(result.ack)), result.publications)
            case .groupChange(_, let request):
                let result = try await groups.change(request, from: device)
                return (.ack(id, .groupChange(result.ack)), result.publications)
            case .groupMembers(_, let request):
                return (.ack(id, .groupMembers(try await groups.members(request, from: device))), [])
            case .requestReadReceipts(_, let request):
                let result = try await groups.requestReadReceipts(request, from: device)
                return (.ack(id, .requestReadReceipts(result.ack)), result.publications)
            case .receiptCounts(_, let request):
                return (.ack(id, .receiptCounts(try await groups.counts(request, from: device))), [])
            case .receiptList(_, let request):
                return (.ack(id, .receiptList(try await groups.list(request, from: device))), [])
            case .pushToken(_, let request):
                return (.ack(id, .pushToken(try await pushTokens.register(request, from: device))), [])
            case .changeView(_, let request):
                let result = try await views.change(request, from: device)
                return (.ack(id, .changeView(result.ack)), result.publications)
            case .typing(_, let request):
                let result = try await typing.typing(request, from: device)
                return (.ack(id, .typing(result.ack)), result.publications)
            case .typingSettings(_, let request):
                return (.ack(id, .typingSettings(try await typing.settings(request, from: device))), [])
            case .setAccountProfile(_, let request):
                let result = try await profiles.set(request, from: device)
                return (.ack(id, .setAccountProfile(result.ack)), result.publications)
            case .accountProfiles(_, let request):
                return (.ack(id, .accountProfiles(try await profiles.profiles(request, from: device))), [])
            case .ping:
                return (.ack(id, .ping(PingAck(serverTime: now()))), [])
            case .connect:
                throw RequestError(.authAlreadyConnected, "This connection is already authenticated.")
            }
        } catch {
            if error.code == .internal {
                logger.error(
                    "Request failed",
                    metadata: [
                        "courier.request.id": "\(id)", "courier.request.type": "\(frame.type)",
                        "error": "\(error.cause ?? error.message)",
                    ]
                )
            }
            return (.error(id, error.wire), [])
        }
    }
}
