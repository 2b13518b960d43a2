// Courier — Apache-2.0
import CourierStorage
import Foundation
import Synchronization
import Testing

/// What the SQLite store and the server's requests rely on in the store's thread (ADR 0037): nothing handed to it is
/// lost however many threads hand work at once (it sleeps only when it has nothing, and is woken then), a task that
/// prefers it runs on it, a round's end comes after the round's jobs, and a round hands each target everything it
/// handed it, at once.
@Suite("Store thread", .timeLimit(.minutes(2)))
struct StoreThreadTests {
    @Test("work handed over from many threads at once, while the thread sleeps and wakes, all runs")
    func noWorkIsLost() async {
        let thread = StoreThread(name: "test-store")
        defer { thread.stop() }
        let producers = 8
        let each = 20_000
        let ran = Atomic<Int>(0)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finished = Atomic<Bool>(false)
            for producer in 0..<producers {
                Thread.detachNewThread {
                    for index in 0..<each {
                        // Now and then a pause, so the thread goes to sleep between bursts and must be woken.
                        if index % 1000 == producer { usleep(200) }
                        let body: @Sendable () -> Void = {
                            if ran.add(1, ordering: .relaxed).newValue == producers * each,
                                !finished.exchange(true, ordering: .relaxed)
                            {
                                done.resume()
                            }
                        }
                        if index.isMultiple(of: 2) { thread.execute(body) } else { thread.atRoundEnd(body) }
                    }
                }
            }
        }
        #expect(ran.load(ordering: .relaxed) == producers * each)
    }

    @Test("a task that prefers the thread runs on it, and is resumed on it")
    func tasksRunOnTheThread() async {
        let thread = StoreThread(name: "test-store")
        defer { thread.stop() }
        let (before, after) = await Task(executorPreference: thread) { () -> (Bool, Bool) in
            let before = thread.isCurrent && StoreThread.current === thread
            // Resumed from another thread: back on this one.
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume() }
            }
            return (before, thread.isCurrent)
        }.value
        #expect(before && after)
        #expect(!thread.isCurrent && StoreThread.current == nil)
    }

    @Test("a round's end comes after every job of the round; a round hands a target all it handed it at once, first")
    func roundEndAndHandOffs() async {
        let thread = StoreThread(name: "test-store")
        defer { thread.stop() }
        final class Target: Sendable {}
        let target = Target()
        let log = Mutex<[String]>([])
        let deliveries = Mutex<[Int]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            // One closure queues a round: three jobs, each asking for the round's end and handing something over.
            thread.execute {
                for index in 0..<3 {
                    thread.atRoundEnd { log.withLock { $0.append("end \(index)") } }
                    StoreThread.handOff(
                        to: target,
                        deliver: { bodies in
                            deliveries.withLock { $0.append(bodies.count) }
                            for body in bodies { body() }
                        }
                    ) { log.withLock { $0.append("answer \(index)") } }
                    log.withLock { $0.append("job \(index)") }
                }
                thread.atRoundEnd { done.resume() }
            }
        }
        #expect(log.withLock { $0 }.prefix(3) == ["job 0", "job 1", "job 2"])
        #expect(deliveries.withLock { $0 } == [3], "one delivery of the three answers")
        // The answers go out before what the round asked for at its end (a commit must not hold up the last one's).
        #expect(Array(log.withLock { $0 }.dropFirst(3)) == ["answer 0", "answer 1", "answer 2", "end 0", "end 1", "end 2"])
    }
}
