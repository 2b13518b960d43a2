// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire

/// Pipelining (issue 19): a device may send requests without waiting for their acks, and the server works on several
/// of them at once, so one device's sends share group commits instead of paying a commit round trip each. What a
/// device sees stays what it saw one request at a time:
/// - acks (and errors) come in request order, and a request's events are published after its ack is queued, so a
///   peer's receipt of a message never reaches its sender before the send's ack;
/// - requests about one conversation run one after the other, in request order (two sends get their seqs in the order
///   sent; a read follows the send before it);
/// - a request about no single conversation (`sync`, `unread`, settings, `pushToken`, `ping`) runs after every
///   request before it has been answered, and every later one runs after it — and so does a request whose answer is
///   a page (`history`, `groupMembers`, `receiptList`): answers wait in memory for those before them, so a device
///   that never reads may hold one page of the server's memory, not a window of them (`ResourceBoundTests`).
///
/// A send that follows a send into the same conversation starts once the one before has its place in the store's
/// commit order (``MessageStore/append(_:whenQueued:)``), not once it has committed: on SQLite both then share a group commit, in order.
///
/// The scheduler lives in the connection's read loop (one task, no lock); the gates are what the requests' tasks wait
/// on.
struct RequestPipeline {
    /// The request before, whose answer this one's follows.
    private var last: PipelineStep?
    /// The last request about no single conversation: later requests run after it.
    private var lastBarrier: PipelineStep?
    /// The last request about each conversation in flight, and whether it is a send.
    private var byConversation: [ConversationID: (step: PipelineStep, isSend: Bool)] = [:]

    /// Schedules `frame`: what it waits for before it runs, and before it is answered.
    mutating func schedule(_ frame: ClientFrame) -> (runAfter: [PipelineGate], answerAfter: PipelineGate?, step: PipelineStep) {
        let step = PipelineStep()
        defer { last = step }
        guard let conversation = frame.pipelineConversation else {
            // Everything before it is answered first: executed, queued, its events published.
            let previous = last?.answered
            lastBarrier = step
            byConversation.removeAll(keepingCapacity: true)
            return (previous.map { [$0] } ?? [], previous, step)
        }
        if byConversation.count >= 64 { byConversation = byConversation.filter { !$0.value.step.executed.isOpen } }
        let isSend = frame.type == .send
        // A send after a send: once the one before is queued for its commit; anything else, once it has committed.
        let before = byConversation[conversation].map { isSend && $0.isSend ? $0.step.queued : $0.step.executed }
        let runAfter = [before, lastBarrier?.executed].compactMap { $0 }
        byConversation[conversation] = (step, isSend)
        return (runAfter, last?.answered, step)
    }

    /// Forgets what is in flight (everything has been answered).
    mutating func reset() { self = RequestPipeline() }
}

/// One pipelined request: opened once its append is queued in the store's commit order (or, at the latest, once it
/// has run), once it has run (its transaction committed), and once it is answered.
final class PipelineStep: Sendable {
    let queued = PipelineGate()
    let executed = PipelineGate()
    let answered = PipelineGate()
}

/// A one-shot signal that tasks wait on without polling.
final class PipelineGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    var isOpen: Bool { state.withLock { $0.open } }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        guard !isOpen else { return }
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
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
        case .createGroup(_, let request): .group(request.group)
        case .groupChange(_, let request): request.conversation
        case .requestReadReceipts(_, let request): request.conversation
        case .receiptCounts(_, let request): request.conversation
        case .changeView(_, let request): request.conversation
        case .connect, .sync, .readReceiptSettings, .unread, .pushToken, .ping: nil
        case .history, .groupMembers, .receiptList: nil
        }
    }
}
