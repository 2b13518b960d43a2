// Courier — Apache-2.0
internal import CourierHarness
internal import Foundation
internal import Hummingbird
internal import Synchronization

/// `--webhooks`: a local receiver on 127.0.0.1 answering 204 to every delivery, registered as an endpoint for every
/// event type before the run. It records, per `message.created`, the time from the message's commit (its `time`) to
/// arrival, so the report shows what webhooks cost the run and how far behind they are. With `failFor`, it answers 503
/// for that long from its start (an endpoint that is down): what the server parks then costs the sends, and the report's
/// drain says how long the catch-up took.
final class WebhookSink: Sendable {
    private struct State {
        var events = 0
        var requests = 0
        var refused = 0
        var created = 0
        var lags = Samples()
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private final class Collector: Sendable {
        let state = Mutex(State())
    }
    private let collector = Collector()
    private let task: Task<Void, any Error>
    let port: Int

    private struct Event: Decodable {
        struct Data: Decodable {
            struct Message: Decodable { let time: Int64 }
            let message: Message?
        }
        let type: String
        let data: Data
    }

    init(failFor: Duration = .zero) async throws {
        let collector = self.collector
        let router = Router()
        let refuseUntil = Int64(Date().timeIntervalSince1970 * 1000) + failFor.components.seconds * 1000
        router.post("/hooks") { request, _ -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 1 << 20)
            let arrived = Int64(Date().timeIntervalSince1970 * 1000)
            if arrived < refuseUntil {
                collector.state.withLock { $0.refused += 1 }
                return .serviceUnavailable
            }
            // One event, or a batch of them (an endpoint with `batch`).
            let data = Data(body.readableBytesView)
            let events = (try? JSONDecoder().decode([Event].self, from: data))
                ?? (try? JSONDecoder().decode(Event.self, from: data)).map { [$0] } ?? []
            let ready = collector.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.events += events.count
                state.requests += 1
                for event in events where event.type == "message.created" {
                    guard let time = event.data.message?.time else { continue }
                    state.created += 1
                    state.lags.add(Double(arrived - time))
                }
                let created = state.created
                let ready = state.waiters.filter { $0.0 <= created }.map(\.1)
                state.waiters.removeAll { $0.0 <= created }
                return ready
            }
            for waiter in ready { waiter.resume() }
            return .noContent
        }
        let (ports, bound) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in bound.yield(channel.localAddress?.port ?? 0) }
        )
        task = Task { try await app.runService() }
        var iterator = ports.makeAsyncIterator()
        port = await iterator.next() ?? 0
    }

    /// Waits until `count` `message.created` events arrived.
    func waitForCreated(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = collector.state.withLock { state -> Bool in
                if state.created >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// What was accepted (`events`, `requests`, their lags) and how many requests were refused while failing.
    var figures: (events: Int, requests: Int, refused: Int, lags: Samples) {
        collector.state.withLock { ($0.events, $0.requests, $0.refused, $0.lags) }
    }

    func stop() { task.cancel() }
}
