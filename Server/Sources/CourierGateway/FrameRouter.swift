// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire
internal import Logging
package import CourierServerCore

/// Dispatches one decoded request of an authenticated device to its service, and maps the outcome to exactly one
/// `ack` or `error` frame. The only place where errors become frames.
package struct FrameRouter: Sendable {
    let services: CourierServices
    let now: @Sendable () -> Timestamp

    package init(services: CourierServices, now: @escaping @Sendable () -> Timestamp) {
        self.services = services
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
                let result = try await services.messages.send(request, from: device, whenQueued: place.queued)
                return (.ack(id, .send(result.ack)), result.publications)
            case .sync(_, let request):
                return (.ack(id, .sync(try await services.messages.sync(request, from: device))), [])
            case .history(_, let request):
                return (.ack(id, .history(try await services.messages.history(request, from: device))), [])
            case .deliver(_, let request):
                let result = try await services.deliveries.deliver(request, from: device)
                return (.ack(id, .deliver(result.ack)), result.publications)
            case .read(_, let request):
                let result = try await services.reads.read(request, from: device, place: place)
                return (.ack(id, .read(result.ack)), result.publications)
            case .readReceiptSettings(_, let request):
                return (.ack(id, .readReceiptSettings(try await services.reads.settings(request, from: device))), [])
            case .unread:
                return (.ack(id, .unread(try await services.reads.unread(from: device))), [])
            case .recall(_, let request):
                let result = try await services.recalls.recall(request, from: device)
                return (.ack(id, .recall(result.ack)), result.publications)
            case .edit(_, let request):
                let result = try await services.edits.edit(request, from: device)
                return (.ack(id, .edit(result.ack)), result.publications)
            case .react(_, let request):
                let result = try await services.reactions.react(request, from: device)
                return (.ack(id, .react(result.ack)), result.publications)
            case .reactions(_, let request):
                return (.ack(id, .reactions(try await services.reactions.reactions(request, from: device))), [])
            case .reactionList(_, let request):
                return (.ack(id, .reactionList(try await services.reactions.list(request, from: device))), [])
            case .createGroup(_, let request):
                let result = try await services.groups.create(request, from: device)
                return (.ack(id, .createGroup(result.ack)), result.publications)
            case .groupChange(_, let request):
                let result = try await services.groups.change(request, from: device)
                return (.ack(id, .groupChange(result.ack)), result.publications)
            case .groupMembers(_, let request):
                return (.ack(id, .groupMembers(try await services.groups.members(request, caller: device.account))), [])
            case .requestReadReceipts(_, let request):
                let result = try await services.groups.requestReadReceipts(request, from: device)
                return (.ack(id, .requestReadReceipts(result.ack)), result.publications)
            case .receiptCounts(_, let request):
                return (.ack(id, .receiptCounts(try await services.groups.counts(request, caller: device.account))), [])
            case .receiptList(_, let request):
                return (.ack(id, .receiptList(try await services.groups.list(request, caller: device.account))), [])
            case .pushToken(_, let request):
                return (.ack(id, .pushToken(try await services.pushTokens.register(request, from: device))), [])
            case .changeView(_, let request):
                let result = try await services.views.change(request, from: device)
                return (.ack(id, .changeView(result.ack)), result.publications)
            case .typing(_, let request):
                let result = try await services.typing.typing(request, from: device)
                return (.ack(id, .typing(result.ack)), result.publications)
            case .typingSettings(_, let request):
                return (.ack(id, .typingSettings(try await services.typing.settings(request, from: device))), [])
            case .setAccountProfile(_, let request):
                let result = try await services.profiles.set(request, from: device)
                return (.ack(id, .setAccountProfile(result.ack)), result.publications)
            case .accountProfiles(_, let request):
                return (.ack(id, .accountProfiles(try await services.profiles.profiles(request, from: device))), [])
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
