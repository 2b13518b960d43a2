// Courier — Apache-2.0
internal import NIOCore
internal import NIOHTTP1
internal import NIOSSL
internal import Synchronization

/// Set when the caller is cancelled, read when the batch is made (the cancellation may come first).
final class CancelFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// A batch under way, confined to the client's event loop.
final class Batch {
    let client: WebhookHTTP
    let origin: WebhookHTTP.Origin
    let queues: [[WebhookRequest]]
    let parallel: Int
    let deadline: NIODeadline
    let mayDefer: Bool
    let promise: EventLoopPromise<[[WebhookAnswer]]>
    var answers: [[WebhookAnswer]]
    var next = 0
    var active = 0
    var cancelled = false
    var finished = false
    /// The connections carrying a request now (closed by a cancellation).
    var busy: [ObjectIdentifier: any Channel] = [:]

    init(
        client: WebhookHTTP,
        origin: WebhookHTTP.Origin,
        queues: [[WebhookRequest]],
        parallel: Int,
        deadline: NIODeadline,
        mayDefer: Bool,
        promise: EventLoopPromise<[[WebhookAnswer]]>
    ) {
        self.client = client
        self.origin = origin
        self.queues = queues
        self.parallel = parallel
        self.deadline = deadline
        self.mayDefer = mayDefer
        self.promise = promise
        answers = queues.map { _ in [] }
    }

    func pump() {
        while active < parallel, !cancelled, next < queues.count {
            let queue = next
            next += 1
            active += 1
            run(queue, at: 0, on: nil)
        }
        if active == 0, !finished, cancelled || next == queues.count {
            finished = true
            promise.succeed(answers)
        }
    }

    func cancel() {
        cancelled = true
        for channel in busy.values { channel.close(promise: nil) }
        pump()
    }

    /// Request `position` of queue `queue`, on `channel` (or a connection taken now). One deadline bounds the attempt,
    /// connecting included: the attempt timeout, or the batch's deadline when sooner.
    func run(_ queue: Int, at position: Int, on channel: (any Channel)?, retryingStale: Bool = false) {
        let requests = queues[queue]
        let now = NIODeadline.now()
        let mayStart = (position == 0 && !mayDefer) || now + client.attemptTimeout <= deadline
        guard position < requests.count, !cancelled, mayStart else {
            if let channel { client.release(channel, to: origin) }
            active -= 1
            pump()
            return
        }
        let attemptDeadline = min(now + client.attemptTimeout, deadline)
        let connected =
            channel.map { client.eventLoop.makeSucceededFuture(($0, reused: false)) }
            ?? client.connection(to: origin, before: attemptDeadline)
        connected.assumeIsolated().whenComplete { result in
            switch result {
            case .failure(let error):
                self.answered(.failed(String(describing: error).prefix(300).description), queue, at: position, on: nil)
            case .success(let (channel, reused)):
                guard !self.cancelled else {
                    self.client.release(channel, to: self.origin)
                    self.answered(.failed(AttemptTimedOut().description), queue, at: position, on: nil)
                    return
                }
                let id = ObjectIdentifier(channel)
                self.busy[id] = channel
                self.client.exchange(requests[position], on: channel, until: attemptDeadline).assumeIsolated()
                    .whenComplete { result in
                        self.busy[id] = nil
                        switch result {
                        case .success(let (answer, reusable)):
                            if !reusable { channel.close(promise: nil) }
                            // A kept connection the endpoint closed as the request went out (its keep-alive ran out):
                            // the request goes again, once, on a new connection.
                            if reused, !retryingStale, answer == .failed(AnswerHandler.closedUnanswered) {
                                self.run(queue, at: position, on: nil, retryingStale: true)
                                return
                            }
                            self.answered(answer, queue, at: position, on: reusable ? channel : nil)
                        case .failure(let error):
                            channel.close(promise: nil)
                            self.answered(.failed(String(describing: error)), queue, at: position, on: nil)
                        }
                    }
            }
        }
    }

    private func answered(_ answer: WebhookAnswer, _ queue: Int, at position: Int, on channel: (any Channel)?) {
        answers[queue].append(answer)
        if answer.isAccepted || !queues[queue][position].endsQueueIfRefused {
            run(queue, at: position + 1, on: channel)
        } else {
            if let channel { client.release(channel, to: origin) }
            active -= 1
            pump()
        }
    }
}

/// Reads one response at a time: its status when it ends (the body is read and dropped, so the connection can carry
/// the next request), or why it did not.
final class AnswerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    var waiting: EventLoopPromise<(WebhookAnswer, Bool)>?
    private var head: HTTPResponseHead?

    func finish(_ answer: WebhookAnswer, reusable: Bool) {
        head = nil
        guard let waiting else { return }
        self.waiting = nil
        waiting.succeed((answer, reusable))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let received):
            // An interim answer (100 Continue) is not the answer.
            if received.status.code >= 200 { head = received }
        case .body:
            break
        case .end:
            guard let head else { return }
            finish(.status(Int(head.status.code)), reusable: head.isKeepAlive)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A TLS endpoint that ends a close-delimited answer without close_notify: the answer ends with the connection.
        if head != nil, let error = error as? NIOSSLError, case .uncleanShutdown = error { return }
        finish(.failed(String(describing: error).prefix(300).description), reusable: false)
        context.close(promise: nil)
    }

    static let closedUnanswered = "The endpoint closed the connection before it answered."

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed(Self.closedUnanswered), reusable: false)
        context.fireChannelInactive()
    }
}
