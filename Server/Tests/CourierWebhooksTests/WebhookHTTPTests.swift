// Courier — Apache-2.0
import CourierTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

@testable import CourierWebhooks
@testable import CourierServerCore

/// The webhook client's own HTTP/1.1 (ADR 0030) against a real server on 127.0.0.1: queues in order, side by side,
/// on kept-alive connections; a refusal ends its queue; a closed connection or a silent endpoint is an answer too.
@Suite("Webhook HTTP client")
struct WebhookHTTPTests {
    /// Answers by path: `/ok` 204, `/close` 200 and closes, `/busy` 503, `/hang` never. Counts the connections it took.
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    final class Endpoint: Sendable {
        let channel: any Channel
        let accepted = Counter()
        /// The path of each request as it arrives.
        let arrivals: AsyncStream<String>

        init() async throws {
            let accepted = self.accepted
            let (arrivals, arrived) = AsyncStream.makeStream(of: String.self)
            self.arrivals = arrivals
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(Answerer(accepted: accepted, arrived: arrived))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
        }

        var port: Int { channel.localAddress?.port ?? 0 }
        func stop() async { try? await channel.close() }
    }

    final class Answerer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let accepted: Counter
        let arrived: AsyncStream<String>.Continuation
        var path = ""
        var requests = 0

        init(accepted: Counter, arrived: AsyncStream<String>.Continuation) {
            self.accepted = accepted
            self.arrived = arrived
        }

        func channelActive(context: ChannelHandlerContext) {
            accepted.value.add(1, ordering: .relaxed)
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): path = head.uri
            case .body: break
            case .end:
                requests += 1
                arrived.yield(path)
                // `/flaky` on a kept connection: closed as the request arrives, as a server whose keep-alive ran out.
                if path == "/flaky", requests > 1 {
                    context.close(promise: nil)
                    return
                }
                let status: HTTPResponseStatus
                switch path {
                case "/flaky": status = .noContent
                case "/ok": status = .noContent
                case "/close": status = .ok
                case "/busy": status = .serviceUnavailable
                default: return  // /hang
                }
                var head = HTTPResponseHead(version: .http1_1, status: status)
                head.headers.add(name: "Content-Length", value: "0")
                if path == "/close" { head.headers.add(name: "Connection", value: "close") }
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                let closing = path == "/close"
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                    if closing { context.close(promise: nil) }
                }
            }
        }
    }

    func request(_ path: String, endsQueue: Bool = true) -> WebhookRequest {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.add(name: "Host", value: "127.0.0.1")
        head.headers.add(name: "Content-Length", value: "2")
        return WebhookRequest(head: head, body: ByteBuffer(string: "{}"), endsQueueIfRefused: endsQueue)
    }

    /// The endpoints here listen on 127.0.0.1.
    static let loopback = WebhookAddressPolicy(allowPrivate: true)

    func origin(_ port: Int) -> WebhookHTTP.Origin {
        WebhookHTTP.target(of: URL(string: "http://127.0.0.1:\(port)/hooks")!)!.origin
    }

    @Test("queues go side by side, each in order on one kept-alive connection, reused by the next batch")
    func keptAlive() async throws {
        let endpoint = try await Endpoint()
        // Kept between batches however slow the machine (the default closes them after 4 s).
        let client = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, idleTimeout: .seconds(600), addressPolicy: Self.loopback)
        let queues = [[request("/ok"), request("/ok"), request("/ok")], [request("/ok"), request("/ok")]]
        let answers = await client.send(queues, to: origin(endpoint.port), parallel: 2, deadline: .now() + .seconds(10))
        #expect(answers == [[.status(204), .status(204), .status(204)], [.status(204), .status(204)]])
        let again = await client.send([[request("/ok")], [request("/ok")]], to: origin(endpoint.port), parallel: 2, deadline: .now() + .seconds(10))
        #expect(again == [[.status(204)], [.status(204)]])
        #expect(endpoint.accepted.value.load(ordering: .relaxed) == 2, "two connections, kept for the next batch")
        await client.shutdown()
        await endpoint.stop()
    }

    @Test("a connection idle past the idle timeout is closed, not used again")
    func idleClosed() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, idleTimeout: .zero, addressPolicy: Self.loopback)
        for _ in 0..<2 {
            let answers = await client.send([[request("/ok")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .seconds(10))
            #expect(answers == [[.status(204)]])
        }
        #expect(endpoint.accepted.value.load(ordering: .relaxed) == 2)
        await client.shutdown()
        await endpoint.stop()
    }

    @Test("an endpoint that closes after answering gets a new connection for the next request")
    func connectionClose() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, addressPolicy: Self.loopback)
        let answers = await client.send([[request("/close"), request("/close"), request("/ok")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .seconds(10))
        #expect(answers == [[.status(200), .status(200), .status(204)]])
        #expect(endpoint.accepted.value.load(ordering: .relaxed) == 3)
        await client.shutdown()
        await endpoint.stop()
    }

    @Test("a kept connection the endpoint closes as the request goes out: the request goes again on a new one")
    func staleConnection() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, idleTimeout: .seconds(600), addressPolicy: Self.loopback)
        let first = await client.send([[request("/flaky")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .seconds(10))
        let second = await client.send([[request("/flaky")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .seconds(10))
        #expect(first == [[.status(204)]] && second == [[.status(204)]])
        #expect(endpoint.accepted.value.load(ordering: .relaxed) == 2)
        await client.shutdown()
        await endpoint.stop()
    }

    @Test("a refusal ends its queue unless the request is past its retries; other queues go on")
    func refusal() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, addressPolicy: Self.loopback)
        let answers = await client.send(
            [
                [request("/ok"), request("/busy"), request("/ok")],
                [request("/busy", endsQueue: false), request("/ok")],
            ],
            to: origin(endpoint.port),
            parallel: 2,
            deadline: .now() + .seconds(10)
        )
        #expect(answers == [[.status(204), .status(503)], [.status(503), .status(204)]])
        await client.shutdown()
        await endpoint.stop()
    }

    @Test("a silent endpoint times out; a closed port is refused; nothing starts that could outlive the deadline")
    func failures() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .milliseconds(300), maxIdlePerOrigin: 4, addressPolicy: Self.loopback)
        let started = ContinuousClock.now
        let hung = await client.send([[request("/hang"), request("/ok")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .seconds(60))
        #expect(hung == [[.failed(AttemptTimedOut().description)]])
        // The attempt's timeout ended it, not the batch's deadline (a full parallel run took 9.3 s to resume here).
        #expect(ContinuousClock.now - started < .seconds(30))
        let late = await client.send([[request("/ok")]], to: origin(endpoint.port), parallel: 1, deadline: .now() + .milliseconds(100))
        #expect(late == [[]], "an attempt that could not be answered before the deadline does not start")
        let port = endpoint.port
        await endpoint.stop()
        let refused = await client.send([[request("/ok"), request("/ok")]], to: origin(port), parallel: 1, deadline: .now() + .seconds(10))
        #expect(refused.count == 1 && refused[0].count == 1)
        if case .failed = refused[0].first {} else { Issue.record("a closed port answered \(refused)") }
        await client.shutdown()
    }

    @Test("a cancelled caller closes the request under way and is answered at once; one cancelled before it sends nothing")
    func cancellation() async throws {
        let endpoint = try await Endpoint()
        let client = WebhookHTTP(attemptTimeout: .seconds(120), maxIdlePerOrigin: 4, addressPolicy: Self.loopback)
        let port = endpoint.port
        let started = ContinuousClock.now
        let sending = Task { await client.send([[request("/hang"), request("/ok")]], to: origin(port), parallel: 1, deadline: .now() + .seconds(240)) }
        var arrivals = endpoint.arrivals.makeAsyncIterator()
        #expect(await arrivals.next() == "/hang")
        sending.cancel()
        let answers = await sending.value
        #expect(answers.count == 1 && answers[0].count == 1 && !(answers[0].first?.isAccepted ?? true))
        #expect(ContinuousClock.now - started < .seconds(60), "the cancellation, not the attempt's timeout, ended it")
        let cancelledFirst = await withTaskGroup(of: [[WebhookAnswer]].self) { group in
            group.cancelAll()
            group.addTask { await client.send([[request("/ok")]], to: origin(port), parallel: 1, deadline: .now() + .seconds(10)) }
            return await group.next() ?? []
        }
        #expect(cancelledFirst == [[]])
        #expect(endpoint.accepted.value.load(ordering: .relaxed) == 1, "nothing was sent for the cancelled caller")
        await client.shutdown()
        await endpoint.stop()
    }
}
