// Courier — Apache-2.0
internal import Foundation
internal import NIOConcurrencyHelpers
internal import NIOCore
internal import NIOPosix

/// A task executor with threads of its own. The readers' lane runs the tasks of requests that only
/// read — counts, lists, history, sync — on ``readers``, so that their work, and their resumption when the store
/// answers, does not queue behind thousands of acks on the shared task pool: the operating system shares the cores
/// between these threads and the pool's, and a device's query is answered in about the time its own work takes.
package final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// The readers' lane: one for the process, every node (and test server) in it shares its threads — half the
    /// cores, at least one (reads of a reconnect storm encode pages: more than one core's work on a large machine).
    static let readers = ThreadExecutor(name: "courier-readers", threads: max(1, System.coreCount / 2))

    private let condition = ConditionLock(value: 0)
    // Guarded by `condition`.
    private var jobs = CircularBuffer<UnownedJob>()

    /// Starts the threads; they live as long as the process.
    package init(name: String, threads: Int = 1) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [unowned self] in run() }
            thread.name = threads > 1 ? "\(name)-\(index)" : name
            thread.start()
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.unlock(withValue: 1)
    }

    /// Each thread takes the oldest job, one at a time, so a long one does not hold the others back.
    private func run() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock(whenValue: 1)
            let job = jobs.removeFirst()
            condition.unlock(withValue: jobs.isEmpty ? 0 : 1)
            job.runSynchronously(on: executor)
        }
    }
}
