// Courier — Apache-2.0
internal import CourierDomain
internal import NIOCore
internal import CourierWire
internal import CourierServerCore

/// The session of one WebSocket connection, without I/O (ADR 0034): what arrives (a decoded frame, a refused one, the
/// end of a request or of a `connect`, the end of the session) goes in; what to do comes out as actions, which the
/// connection's channel handler (``SessionHandler``) carries out on its event loop. As PostgresNIO's and
/// swift-websocket's state machines, it holds no reference to the channel, the store or a clock, so every ordering
/// rule below is table-tested on its own (`SessionStateMachineTests`).
///
/// Phases: `awaitingConnect` → `connecting` → `open` (authenticated) → `ended`; a refused `connect` goes back to
/// `awaitingConnect`. Every request gets exactly one answer, in the order the requests came (pipelining):
/// - acks and errors leave in request order, and a request's events are published when its answer leaves, so a
///   peer's receipt of a message never reaches its sender before the send's ack;
/// - requests about one conversation run one after the other, in request order; a send that follows a send into the
///   same conversation (a read that follows a read) starts at once, told to wait for the one before to have its place
///   in the store's commit order (`after`: the runner waits for that, without a trip through the event loop), so both
///   share a group commit in order — reads of one reader waiting together are one write;
/// - a request about no single conversation (`sync`, `unread`, settings, `pushToken`, `ping`), and one answered with a
///   page (`history`, `groupMembers`, `receiptList`), runs once every request before it is answered, and later ones
///   run after it;
/// - `connect` runs once everything before it is answered; what arrives while it runs waits, unread, and is taken
///   once it is answered (it may be refused for `auth.required`, or run as the device it authenticated);
/// - at most `window` requests are unanswered at once: beyond that, what arrives waits and the connection is not read.
struct SessionStateMachine<Answer> {
    /// A frame as the connection decoded it.
    enum Inbound {
        /// A request other than `connect`.
        case request(ClientFrame)
        case connect(RequestID, ConnectRequest)
        /// Refused before it is a request: not JSON, too large, binary, a bad field. `type` is the frame's type when
        /// it could be read (before `connect`, any other type is refused for that instead).
        case refused(RequestID?, WireError, type: FrameType?)
    }

    /// What a request's place in the order receives.
    enum Outcome {
        /// The request ran: its encoded answer and what to publish after it.
        case answered(Answer)
        /// Refused without running.
        case refused(RequestID?, WireError)
    }

    enum Action {
        /// Run request `index` (ask the services) once the send or read `after` has its place in the store's commit
        /// order (or has ended); report with ``finished(_:_:)``.
        case run(Int, ClientFrame, after: Int?)
        /// Authenticate; report with ``connected(_:_:)`` or ``connectRefused(_:_:countsAsFailure:)``.
        case connect(Int, RequestID, ConnectRequest)
        /// Write this answer now (the answers come out in request order).
        case answer(Outcome)
        /// End the session (too many failed connects on this connection).
        case end(SessionEndReason)
    }

    private enum Phase {
        case awaitingConnect
        case connecting
        case open
        /// The device closed: nothing new is taken, what was read still runs (a read marker sent just before the
        /// close is not lost).
        case draining
        case ended
    }

    private enum Kind {
        /// A request about one conversation, after the request `before` about it (if still unanswered when this one
        /// came) and the request about no single conversation `barrier`; `follows`: both are sends, or both reads
        /// (``ClientFrame/pipelinesInStore``).
        case request(ClientFrame, before: Int?, barrier: Int?, follows: Bool)
        /// A request about no single conversation, or answered with a page: it runs alone.
        case barrier(ClientFrame)
        case connect(RequestID, ConnectRequest)
        case immediate
    }

    private struct Entry {
        let index: Int
        let kind: Kind
        var started = false
        /// Ran (or was refused, or was dropped because the session ended): `outcome` is final.
        var executed = false
        var outcome: Outcome?
    }

    private var phase = Phase.awaitingConnect
    /// Unanswered requests, oldest first: `entries[offset + k]` is request `first + k`.
    private var entries: [Entry] = []
    private var offset = 0
    /// Frames that arrived while a `connect` ran or while the window was full, oldest first. (At most what one read
    /// of the socket holds: the connection is not read meanwhile.)
    private var held = CircularBuffer<Inbound>()
    private var nextIndex = 0
    /// The last request about no single conversation, and the last request about each conversation since it.
    private var lastBarrier: Int?
    private var lastByConversation: [ConversationID: (index: Int, type: FrameType)] = [:]
    private(set) var failedConnects = 0
    let window: Int
    let maxFailedConnects: Int

    init(window: Int, maxFailedConnects: Int) {
        self.window = max(1, window)
        self.maxFailedConnects = maxFailedConnects
    }

    /// Whether the connection should read more: not while a `connect` runs, nor with `window` requests unanswered.
    var wantsToRead: Bool {
        switch phase {
        case .ended, .draining: true  // reading on sees the peer's close
        case .connecting: false
        case .awaitingConnect, .open: held.isEmpty && unanswered < window
        }
    }

    /// Ended, or draining: nothing new is taken.
    var isEnded: Bool {
        switch phase {
        case .ended, .draining: true
        default: false
        }
    }

    /// A `connect` succeeded (it stays so while the session drains).
    private(set) var isAuthenticated = false

    /// Requests not yet answered (tests, metrics).
    var unanswered: Int { entries.count - offset }

    // MARK: Events

    mutating func received(_ inbound: Inbound) -> [Action] {
        guard !isEnded else { return [] }
        held.append(inbound)
        return advance()
    }

    /// Request `index` ran; `nil` when it did not (the session ended while it waited to start).
    mutating func finished(_ index: Int, _ answer: Answer?) -> [Action] {
        settle(index, answer.map { .answered($0) })
    }

    /// `connect` authenticated the session; `ack` is its answer. (Not once the session has ended: the caller undoes
    /// the registration instead.)
    mutating func connected(_ index: Int, _ ack: Answer) -> [Action] {
        guard case .connecting = phase else { return settle(index, nil) }
        phase = .open
        isAuthenticated = true
        return settle(index, .answered(ack))
    }

    /// `connect` was refused; a failure of the token counts toward the connection's limit.
    mutating func connectRefused(_ index: Int, _ error: WireError, requestID: RequestID, countsAsFailure: Bool) -> [Action] {
        guard case .connecting = phase else { return settle(index, nil) }
        phase = .awaitingConnect
        if countsAsFailure { failedConnects += 1 }
        guard failedConnects >= maxFailedConnects else { return settle(index, .refused(requestID, error)) }
        // Its refusal still goes out, before the close frame; nothing read after it is answered.
        held.removeAll()
        var actions = settle(index, .refused(requestID, error))
        actions.append(.end(.tooManyFailedConnects))
        actions.append(contentsOf: end())
        return actions
    }

    /// The session ends: nothing new is taken; what runs still finishes and publishes its events (its answer goes to a
    /// queue that no longer writes). When the server decided (`dropping`), what has not started never runs; when the
    /// device closed, what it sent before still runs, in order.
    @discardableResult
    mutating func end(dropping: Bool = true) -> [Action] {
        switch phase {
        case .ended: return []
        case .draining where !dropping: return []
        default: break
        }
        guard dropping else {
            // Frames held for the window are still taken; a `connect` under way is not completed (its outcome
            // settles its place), so what was held behind it is not run.
            if case .connecting = phase { held.removeAll() }
            phase = .draining
            return advance()
        }
        held.removeAll()
        phase = .ended
        for position in offset..<entries.count where !entries[position].started && !entries[position].executed {
            entries[position].executed = true
            entries[position].outcome = nil
        }
        return advance()
    }

    // MARK: Scheduling

    private mutating func settle(_ index: Int, _ outcome: Outcome?) -> [Action] {
        guard let position = position(of: index) else { return [] }
        entries[position].executed = true
        entries[position].outcome = outcome
        return advance()
    }

    /// Answers what is in order, starts what may start and takes held frames, until nothing moves.
    private mutating func advance() -> [Action] {
        var actions: [Action] = []
        var moved = true
        while moved {
            moved = false
            while offset < entries.count, entries[offset].executed {
                if let outcome = entries[offset].outcome { actions.append(.answer(outcome)) }
                offset += 1
            }
            if offset == entries.count {
                // Everything is answered: nothing is left to follow.
                entries.removeAll(keepingCapacity: true)
                offset = 0
                lastBarrier = nil
                lastByConversation.removeAll(keepingCapacity: true)
            } else if offset >= 64 {
                entries.removeFirst(offset)
                offset = 0
            }
            if start(into: &actions) { moved = true }
            if mayTake, let next = held.popFirst() {
                admit(next)
                moved = true
            }
        }
        return actions
    }

    private var mayTake: Bool {
        switch phase {
        case .awaitingConnect, .open, .draining: unanswered < window
        case .connecting, .ended: false
        }
    }

    /// Starts every request whose turn has come; answers whether one started.
    private mutating func start(into actions: inout [Action]) -> Bool {
        if case .ended = phase { return false }
        var started = false
        for position in offset..<entries.count where !entries[position].started && !entries[position].executed {
            let entry = entries[position]
            let atHead = position == offset
            switch entry.kind {
            case .immediate:
                continue
            case .connect(let id, let request):
                guard atHead else { continue }
                actions.append(.connect(entry.index, id, request))
            case .barrier(let frame):
                guard atHead else { continue }
                actions.append(.run(entry.index, frame, after: nil))
            case .request(let frame, let before, let barrier, let follows):
                guard barrier.map(isExecuted) ?? true else { continue }
                // A send after a running send (a read after a running read) goes now, told which one to follow;
                // anything else waits for the request before it to have run.
                var after: Int?
                if let before, !isExecuted(before) {
                    guard follows, isStarted(before) else { continue }
                    after = before
                }
                actions.append(.run(entry.index, frame, after: after))
            }
            entries[position].started = true
            started = true
        }
        return started
    }

    /// Gives `inbound` its place in the order.
    private mutating func admit(_ inbound: Inbound) {
        let index = nextIndex
        nextIndex += 1
        switch inbound {
        case .request(let frame):
            guard isAuthenticated else {
                entries.append(Entry(index: index, kind: .immediate, executed: true, outcome: .refused(frame.requestID, Self.authRequired)))
                return
            }
            guard let conversation = frame.pipelineConversation else {
                entries.append(Entry(index: index, kind: .barrier(frame)))
                lastBarrier = index
                lastByConversation.removeAll(keepingCapacity: true)
                return
            }
            if lastByConversation.count >= 64 {
                // Conversations whose last request has run have nothing to follow.
                lastByConversation = lastByConversation.filter { !isExecuted($0.value.index) }
            }
            let before = lastByConversation[conversation]
            lastByConversation[conversation] = (index, frame.type)
            let follows = frame.pipelinesInStore && before?.type == frame.type
            let kind = Kind.request(frame, before: before?.index, barrier: lastBarrier, follows: follows)
            entries.append(Entry(index: index, kind: kind))
        case .connect(let id, let request):
            guard !isAuthenticated else {
                let error = WireError(code: .authAlreadyConnected, message: "This connection is already authenticated.")
                entries.append(Entry(index: index, kind: .immediate, executed: true, outcome: .refused(id, error)))
                return
            }
            // Not after the device closed: there is no session to open.
            if case .draining = phase {
                entries.append(Entry(index: index, kind: .immediate, executed: true, outcome: nil))
                return
            }
            // What arrives from now on waits until it is answered.
            phase = .connecting
            entries.append(Entry(index: index, kind: .connect(id, request)))
        case .refused(let id, let error, let type):
            // Before `connect`, a frame of any other type is refused for that, whatever else is wrong with it.
            let refusal = !isAuthenticated && type != nil && type != .connect ? Self.authRequired : error
            entries.append(Entry(index: index, kind: .immediate, executed: true, outcome: .refused(id, refusal)))
        }
    }

    private func position(of index: Int) -> Int? {
        guard offset < entries.count else { return nil }
        let position = offset + index - entries[offset].index
        return position >= offset && position < entries.count ? position : nil
    }

    /// Answered requests have run.
    private func isExecuted(_ index: Int) -> Bool { position(of: index).map { entries[$0].executed } ?? true }

    private func isStarted(_ index: Int) -> Bool { position(of: index).map { entries[$0].started } ?? true }

    static var authRequired: WireError { WireError(code: .authRequired, message: "Send 'connect' with a token first.") }
}

extension ClientFrame {
    /// The one conversation a request is about, which orders it against the device's other requests about it;
    /// `nil` for requests about the account as a whole, and for those answered with a page (up to megabytes).
    var pipelineConversation: ConversationID? {
        switch self {
        case .send(_, let request): request.conversation
        case .deliver(_, let request): request.conversation
        case .read(_, let request): request.conversation
        case .recall(_, let request): request.conversation
        case .edit(_, let request): request.conversation
        case .react(_, let request): request.conversation
        case .createGroup(_, let request): .group(request.group)
        case .groupChange(_, let request): request.conversation
        case .requestReadReceipts(_, let request): request.conversation
        case .receiptCounts(_, let request): request.conversation
        case .changeView(_, let request): request.conversation
        case .typing(_, let request): request.conversation
        case .reactions(_, let request): request.conversation
        case .connect, .sync, .readReceiptSettings, .unread, .pushToken, .typingSettings, .ping: nil
        case .setAccountProfile, .accountProfiles: nil
        case .history, .groupMembers, .receiptList, .reactionList: nil
        }
    }
}

extension ClientFrame {
    /// Requests that only read the store: they run in the readers' lane (``RequestRunner/Lane/reads``).
    var onlyReads: Bool {
        switch self {
        case .sync, .history, .unread, .receiptCounts, .receiptList, .groupMembers, .typing, .accountProfiles, .reactions,
            .reactionList:
            true
        default: false
        }
    }
}

extension ClientFrame {
    /// A request that gets a place in the store's commit order before it commits (a send's append, a read's write),
    /// so the same kind of request after it about the same conversation can start at once (``SessionStateMachine``).
    var pipelinesInStore: Bool { type == .send || type == .read }
}
