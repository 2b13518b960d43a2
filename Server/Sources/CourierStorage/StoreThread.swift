// Courier — Apache-2.0
#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif
internal import Foundation
internal import NIOConcurrencyHelpers

/// A thread of our own that runs tasks (a `TaskExecutor`) in rounds: every job queued when a round begins and the jobs
/// those make ready (up to ``maxJobsPerRound``), then the answers the round handed over, then what it asked for at its
/// end — the way an event loop runs its tasks, then its I/O (ADR 0037).
///
/// SQLite's store runs its writes here (its group commit is a round's end hook: one transaction for every write the
/// round's jobs queued), and the server runs the requests that write on it too. A request's task then calls the store,
/// waits for its commit and derives its answer without leaving the thread: the only crossings are the one that hands
/// the request over (a job queued from the connection's event loop) and the one that hands the answer back (a round's
/// end hook hands each event loop everything the round answered for it, at once).
///
/// Blocking here is the point: a GRDB call made on this thread (``current``) runs on it, where on the shared task
/// pool the same call would hop to GRDB's queue and back. The thread sleeps only when a round found nothing to do,
/// and is woken only then.
package final class StoreThread: TaskExecutor, @unchecked Sendable {
    private struct Work {
        var jobs: [UnownedJob] = []
        var closures: [@Sendable () -> Void] = []
        var roundEnd: [@Sendable () -> Void] = []
        var sleeping = false
        var stopping = false
        var isEmpty: Bool { jobs.isEmpty && closures.isEmpty && roundEnd.isEmpty }
    }

    private let condition = ConditionLock(value: 0)
    // Guarded by `condition`.
    private var work = Work()
    // Set once before `init` returns.
    private var thread = pthread_t()

    /// Starts the thread; it runs until ``stop()``.
    package init(name: String) {
        let started = ConditionLock(value: 0)
        let box = Unmanaged.passRetained(Start(thread: self, name: name, started: started))
        var handle = pthread_t()
        let made = pthread_create(&handle, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            start.run()
            return nil
        }, box.toOpaque())
        precondition(made == 0, "pthread_create failed: \(made)")
        pthread_detach(handle)
        started.lock(whenValue: 1)
        started.unlock()
    }

    /// What the new thread needs before it runs (the thread object, held strongly only while it runs).
    private final class Start {
        let thread: StoreThread
        let name: String
        let started: ConditionLock<Int>
        init(thread: StoreThread, name: String, started: ConditionLock<Int>) {
            (self.thread, self.name, self.started) = (thread, name, started)
        }
        func run() {
            thread.thread = pthread_self()
            Thread.current.name = name
            pthread_setspecific(StoreThread.currentKey, Unmanaged.passUnretained(thread).toOpaque())
            started.lock()
            started.unlock(withValue: 1)
            thread.main()
        }
    }

    /// Whether the caller runs on this thread.
    package var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        add { $0.jobs.append(job) }
    }

    /// Runs `body` on the thread at the start of the next round (no task is made for it).
    package func execute(_ body: @escaping @Sendable () -> Void) {
        add { $0.closures.append(body) }
    }

    /// Runs `body` once on the thread, after the jobs of a round: this round's when called on the thread, else the
    /// next one's.
    package func atRoundEnd(_ body: @escaping @Sendable () -> Void) {
        add { $0.roundEnd.append(body) }
    }

    /// The thread ends once what is queued has run (the store that owns it is gone).
    package func stop() {
        add { $0.stopping = true }
    }

    /// Changes the queued work, waking the thread only if it sleeps.
    private func add(_ change: (inout Work) -> Void) {
        condition.lock()
        change(&work)
        if work.sleeping {
            work.sleeping = false
            condition.unlock(withValue: 1)
        } else {
            // Awake, or already woken by an earlier change (whose 1 must stay until the thread takes it).
            condition.unlock()
        }
    }

    /// The most jobs a round runs before its end, when jobs keep coming: bounds how long a round's writes wait for
    /// their commit under a steady load.
    package static let maxJobsPerRound = 256

    private func main() {
        let executor = asUnownedTaskExecutor()
        var round = Work()
        var ran = 0
        while true {
            condition.lock()
            if work.isEmpty {
                if work.stopping {
                    condition.unlock()
                    return
                }
                work.sleeping = true
                condition.unlock(withValue: 0)
                condition.lock(whenValue: 1)
            }
            swap(&round.jobs, &work.jobs)
            swap(&round.closures, &work.closures)
            condition.unlock(withValue: 0)
            for closure in round.closures { closure() }
            for job in round.jobs { job.runSynchronously(on: executor) }
            ran += round.jobs.count + round.closures.count
            round.jobs.removeAll(keepingCapacity: true)
            round.closures.removeAll(keepingCapacity: true)
            condition.lock()
            // Jobs the round made ready (a send resumed by the one before it having its place in the commit order, a
            // task resumed by another) run in this round too, up to the bound, so their writes share its commit.
            if !(work.jobs.isEmpty && work.closures.isEmpty), ran < Self.maxJobsPerRound {
                condition.unlock()
                continue
            }
            ran = 0
            // What the round's jobs asked for at its end (and what others asked for meanwhile).
            swap(&round.roundEnd, &work.roundEnd)
            condition.unlock()
            // The answers first: a commit asked for at this round's end must not hold up those of the last one.
            deliverHandOffs()
            for body in round.roundEnd { body() }
            round.roundEnd.removeAll(keepingCapacity: true)
        }
    }

    // MARK: Hand-offs, one per target and round

    /// What the round's jobs handed to each target so far (only touched on the thread).
    private var handOffs: [ObjectIdentifier: (deliver: @Sendable ([@Sendable () -> Void]) -> Void, bodies: [@Sendable () -> Void])] = [:]

    /// Hands `body` to `target` (an event loop, say) with everything else the round hands it: at the round's end,
    /// `deliver` gets them all at once — one wake-up of the target for many answers. Called off the thread (or on a
    /// thread that is not a store's), `deliver` gets `body` alone at once.
    package static func handOff(
        to target: AnyObject,
        deliver: @escaping @Sendable ([@Sendable () -> Void]) -> Void,
        _ body: @escaping @Sendable () -> Void
    ) {
        guard let thread = current else { return deliver([body]) }
        thread.handOffs[ObjectIdentifier(target), default: (deliver, [])].bodies.append(body)
    }

    /// At a round's end, before what was asked for there (a commit): everything the round handed over.
    private func deliverHandOffs() {
        guard !handOffs.isEmpty else { return }
        let all = handOffs
        handOffs = [:]
        for (deliver, bodies) in all.values { deliver(bodies) }
    }

    // MARK: The thread the caller runs on

    nonisolated(unsafe) private static var currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The store thread the caller runs on, if any: there a short blocking call (a SQLite read) costs less than a hop
    /// to another thread and back. Never on the shared task pool.
    package static var current: StoreThread? {
        pthread_getspecific(currentKey).map { Unmanaged<StoreThread>.fromOpaque($0).takeUnretainedValue() }
    }
}
