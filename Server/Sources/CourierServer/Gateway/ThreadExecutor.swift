// Courier — Apache-2.0
internal import Foundation
internal import NIOConcurrencyHelpers

/// A task executor with a thread of its own. The readers' lane (issue 35, item 3) runs the tasks of requests that only
/// read — counts, lists, history, sync — on ``readers``, so that their work, and their resumption when the store
/// answers, does not queue behind thousands of acks on the shared task pool: the operating system shares the cores
/// between this thread and the pool's, and a device's query is answered in about the time its own work takes.
package final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// The readers' lane: one for the process, every node (and test server) in it shares the thread.
    static let readers = ThreadExecutor(name: "courier-readers")

    private let condition = ConditionLock(value: 0)
    // Guarded by `condition`.
    private var jobs: [UnownedJob] = []

    /// Starts the thread; it lives as long as the process.
    package init(name: String) {
        let thread = Thread { [unowned self] in run() }
        thread.name = name
        thread.start()
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.unlock(withValue: 1)
    }

    private func run() {
        let executor = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        while true {
            condition.lock(whenValue: 1)
            swap(&batch, &jobs)
            condition.unlock(withValue: 0)
            for job in batch { job.runSynchronously(on: executor) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
