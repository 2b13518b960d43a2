// Courier — Apache-2.0
internal import CourierStorage
internal import NIOCore
internal import ServiceLifecycle

/// Where the requests of every session that wait for the store run (ADR 0034): worker tasks in one task group, owned
/// by a service, instead of a task per connection or per request. A session hands a request here from its event loop
/// and is told of the answer back on it; requests that wait for nothing (`ping`, a refusal) never come here.
///
/// Two lanes: requests that write, on the shared task pool, and requests that only read (``Lane/reads``), whose
/// workers prefer ``ThreadExecutor/readers``'s thread, so a device's query is not queued behind a burst of acks.
///
/// A request goes to an idle worker of its lane when there is one: one resumption, as a task waiting on a signal
/// costs. Otherwise the runner adds a worker; after a burst, workers beyond ``maxIdleWorkers`` per lane end, so an
/// idle node holds a few.
///
/// It is also what a node's drain waits for: on graceful shutdown the server stops listening and ends every session
/// (close 1001, `server.shuttingDown`); the runner goes on until the last session's connection has closed, finishes
/// what it holds, and returns. A device that never answers its close frame holds the drain until the session's close
/// timeout, or until the node's drain bound (`--drain-seconds`) cancels it.
package final class RequestRunner: Service {
    typealias Job = @Sendable () async -> Void

    enum Lane: Int, Sendable, CaseIterable {
        case writes, reads
    }

    private struct Pool {
        var pending = CircularBuffer<Job>()
        var idle: [CheckedContinuation<Job?, Never>] = []
    }

    private struct State {
        var pools = [Pool(), Pool()]
        var sessions = 0
        var stopping = false
        var finished = false
    }

    /// Workers kept waiting, per lane, when there is nothing to run.
    static let maxIdleWorkers = 16

    private let state = Locked(State())
    /// Asks the runner's task group for one more worker of a lane.
    private let spawn: AsyncStream<Lane>.Continuation
    private let spawns: AsyncStream<Lane>
    private let readers: ThreadExecutor
    /// Where the writes lane's workers run: the store's own thread when it has one (ADR 0037), else the shared pool.
    private let writers: (any TaskExecutor)?

    package init(readers: ThreadExecutor = .readers, writers: (any TaskExecutor)? = nil) {
        (spawns, spawn) = AsyncStream.makeStream(of: Lane.self)
        self.readers = readers
        self.writers = writers
    }

    /// Runs `job` in `lane` as soon as a worker is free; `false` once the runner has stopped.
    func submit(_ lane: Lane = .writes, _ job: @escaping Job) -> Bool {
        enum Route { case worker(CheckedContinuation<Job?, Never>), queued, refused }
        let route = state.withLock { state -> Route in
            if state.finished { return .refused }
            if let worker = state.pools[lane.rawValue].idle.popLast() { return .worker(worker) }
            state.pools[lane.rawValue].pending.append(job)
            return .queued
        }
        switch route {
        case .worker(let worker): worker.resume(returning: job)
        case .queued: spawn.yield(lane)
        case .refused: return false
        }
        return true
    }

    /// The node is draining: a session that begins now is ended at once.
    var isStopping: Bool { state.withLock { $0.stopping } }

    /// A session began (its connection upgraded).
    func sessionOpened() { state.withLock { $0.sessions += 1 } }

    /// A session's connection closed.
    func sessionClosed() {
        let last = state.withLock { state in
            state.sessions -= 1
            return state.stopping && state.sessions == 0
        }
        if last { finish() }
    }

    func run() async {
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await withDiscardingTaskGroup { group in
                    for await lane in spawns {
                        switch lane {
                        case .writes: group.addTask(executorPreference: writers) { await self.work(.writes) }
                        case .reads: group.addTask(executorPreference: readers) { await self.work(.reads) }
                        }
                    }
                }
            } onCancel: {
                // The drain bound passed: idle workers end (busy ones finish their request).
                self.finish()
            }
        } onGracefulShutdown: {
            let idle = self.state.withLock { state in
                state.stopping = true
                return state.sessions == 0
            }
            if idle { self.finish() }
        }
    }

    /// Takes jobs of `lane` until there is nothing to do and enough workers wait already, or the runner finishes.
    private func work(_ lane: Lane) async {
        while let job = await next(lane) { await job() }
    }

    private func next(_ lane: Lane) async -> Job? {
        enum Take { case job(Job), wait, end }
        let take = state.withLock { state -> Take in
            if let job = state.pools[lane.rawValue].pending.popFirst() { return .job(job) }
            if state.finished || state.pools[lane.rawValue].idle.count >= Self.maxIdleWorkers { return .end }
            return .wait
        }
        switch take {
        case .job(let job): return job
        case .end: return nil
        case .wait:
            return await withCheckedContinuation { continuation in
                let run = state.withLock { state -> (Job?, Bool) in
                    if let job = state.pools[lane.rawValue].pending.popFirst() { return (job, true) }
                    if state.finished { return (nil, true) }
                    state.pools[lane.rawValue].idle.append(continuation)
                    return (nil, false)
                }
                if run.1 { continuation.resume(returning: run.0) }
            }
        }
    }

    /// No more jobs: idle workers end, busy ones end after their job, and the task group returns.
    private func finish() {
        let idle = state.withLock { state -> [CheckedContinuation<Job?, Never>] in
            state.finished = true
            defer { for lane in Lane.allCases { state.pools[lane.rawValue].idle = [] } }
            return state.pools.flatMap(\.idle)
        }
        for worker in idle { worker.resume(returning: nil) }
        spawn.finish()
    }
}
