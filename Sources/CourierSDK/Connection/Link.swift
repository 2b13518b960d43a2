// Courier — Apache-2.0
internal import CourierWire

/// One authenticated connection: request/response matching by request id, plus the work the connection's session
/// loop has to do (delivery receipts to send, conversations to resync, outbox to flush).
final class Link: Sendable {
    private let sender = Locked<(any TransportSender)?>(nil)
    private let acks = Waiters<RequestID, Result<Ack, WireError>>()
    private let nextID = Locked(0)
    private let work = Locked(PendingWork())
    private let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    let timeout: Duration
    let clock: any Clock<Duration>
    let coder = FrameCoder()

    struct PendingWork {
        var receipts: [ConversationID: Seq] = [:]
        var needsResync = false
        /// Conversations where a live event arrived past a gap.
        var gaps: Set<ConversationID> = []
        /// Live traffic came a while ago: time to move the sync cursor forward (ADR 0017).
        var needsCheckpoint = false
        /// An account this device holds messages of has no profile here yet (a new contact): fetch it (ADR 0053).
        var needsProfiles = false
    }

    /// The timer of the next sync checkpoint, while one is due.
    private let checkpointTimer = Locked<Task<Void, Never>?>(nil)

    init(timeout: Duration, clock: any Clock<Duration>) {
        self.timeout = timeout
        self.clock = clock
        (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func attach(_ transport: any TransportSender) { sender.withLock { $0 = transport } }

    /// Sends a request and waits for its ack (`.success`) or error frame (`.failure`).
    ///
    /// - Throws: ``CourierError/timedOut`` or ``CourierError/notConnected`` when no answer comes.
    func request(_ make: (RequestID) -> ClientFrame) async throws(CourierError) -> Result<Ack, WireError> {
        let id = try await submit(make)
        return try await reply(to: id)
    }

    /// Sends a request without waiting for its answer (pipelining: frames go out in the order submitted, and the
    /// server answers in that order); collect the answer with ``reply(to:)``.
    func submit(_ make: (RequestID) -> ClientFrame) async throws(CourierError) -> RequestID {
        let next = nextID.withLock {
            $0 += 1
            return $0
        }
        let id = RequestID(rawValue: String(next))
        let frame = make(id)
        guard let transport = sender.withLock({ $0 }), let text = try? coder.encode(frame) else { throw .notConnected }
        acks.register(id)
        do {
            try await transport.send(text)
        } catch {
            acks.cancel(id)
            throw .notConnected
        }
        return id
    }

    /// The answer to a submitted request: its ack (`.success`) or error frame (`.failure`).
    ///
    /// - Throws: ``CourierError/timedOut`` or ``CourierError/notConnected`` when no answer comes.
    func reply(to id: RequestID) async throws(CourierError) -> Result<Ack, WireError> {
        do {
            let acks = self.acks
            return try await withTimeout(timeout, clock: clock) { try await acks.wait(for: id) }
        } catch {
            acks.cancel(id)
            throw error as? CourierError ?? .notConnected
        }
    }

    /// Forgets a submitted request whose answer will not be collected.
    func abandon(_ id: RequestID) { acks.cancel(id) }

    /// Routes an `ack` or `error` frame to its request.
    func resolve(_ id: RequestID, _ result: Result<Ack, WireError>) { acks.resolve(id, with: .success(result)) }

    /// Ends the link: every open request fails with ``CourierError/notConnected``.
    func close() {
        acks.failAll(with: CourierError.notConnected)
        sender.withLock { $0 = nil }
        checkpointTimer.withLock { $0?.cancel() }
        wake.finish()
    }

    /// Live traffic changed the local store: a sync checkpoint follows `interval` later (one per interval, however
    /// much traffic), so the cursor a reconnect sends is at most that old.
    func noteLiveTraffic(checkpointAfter interval: Duration?) {
        guard let interval else { return }
        let clock = self.clock
        checkpointTimer.withLock { timer in
            guard timer == nil else { return }
            timer = Task { [weak self] in
                guard (try? await clock.sleep(for: interval, tolerance: nil)) != nil, let self else { return }
                self.checkpointTimer.withLock { $0 = nil }
                self.work.withLock { $0.needsCheckpoint = true }
                self.wake.yield()
            }
        }
    }

    // MARK: Work for the session loop

    func noteReceipts(_ due: [ConversationID: Seq]) {
        guard !due.isEmpty else { return }
        work.withLock { $0.receipts.merge(due) { max($0, $1) } }
        wake.yield()
    }

    func requestResync() {
        work.withLock { $0.needsResync = true }
        wake.yield()
    }

    /// Asks for the gaps in `conversations` to be filled (by `history`, falling back to a sync).
    func requestGapFill(_ conversations: Set<ConversationID>) {
        guard !conversations.isEmpty else { return }
        work.withLock { $0.gaps.formUnion(conversations) }
        wake.yield()
    }

    /// Asks for the profiles of the accounts this device holds none of.
    func requestProfiles() {
        work.withLock { $0.needsProfiles = true }
        wake.yield()
    }

    func signal() { wake.yield() }

    func takeWork() -> PendingWork {
        work.withLock { work in
            defer { work = PendingWork() }
            return work
        }
    }

    var hasPendingReceipts: Bool { work.withLock { !$0.receipts.isEmpty } }

    /// Waits for the next signal; returns `false` once the link is closed.
    func waitForWork() async -> Bool {
        var iterator = wakeUps.makeAsyncIterator()
        return await iterator.next() != nil
    }
}

extension Result<Ack, WireError> {
    /// The ack; the server's refusal thrown as a ``CourierError`` (``CourierError/notAMember(_:)`` naming
    /// `conversation`).
    func ack(about conversation: ConversationID? = nil) throws(CourierError) -> Ack {
        switch self {
        case .success(let ack): return ack
        case .failure(let error): throw CourierError(error, conversation: conversation)
        }
    }
}
