// Courier — Apache-2.0
import CourierStorage
import CourierTestSupport
import Testing

/// What PostgreSQL's batched appends rely on beyond what ``GroupCommitTests`` shows for SQLite's groups: inputs that
/// may not share a batch (two sends into one conversation) wait for a later one, in the order they were queued, while
/// the others join the batch.
@Suite("Coalescer", .timeLimit(.minutes(1)))
struct CoalescerTests {
    /// A conversation and a message number.
    struct Send: Sendable, Hashable {
        let conversation: String
        let number: Int
    }

    @Test("inputs kept apart wait for later batches in their order; the others join the next batch")
    func apartWaits() async throws {
        let coalescer = Coalescer<Send, Int>(maxBatch: 10, apart: { $0.conversation == $1.conversation })
        let batches = Locked<[[Send]]>([])
        let (opened, open) = AsyncStream.makeStream(of: Void.self)
        let run: @Sendable ([Send]) async -> [Int] = { batch in
            batches.withLock { $0.append(batch) }
            if batch.first?.number == 0 {  // the first batch holds the lead until the rest is queued
                var gate = opened.makeAsyncIterator()
                _ = await gate.next()
            }
            return batch.map(\.number)
        }
        let first = Task { await coalescer.submit(Send(conversation: "a", number: 0), run: run) }
        while batches.withLock({ $0.isEmpty }) { await Task.yield() }
        // Queued one after the other, so their order is known: a1 b2 a3 c4 b5 a6.
        let queued = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)].map(Send.init)
        var tasks: [Task<Int, Never>] = []
        for send in queued {
            tasks.append(Task { await coalescer.submit(send, run: run) })
            while coalescer.queuedCount < tasks.count { await Task.yield() }
        }
        open.yield()
        #expect(await first.value == 0)
        for (task, send) in zip(tasks, queued) { #expect(await task.value == send.number, "each caller gets its own") }
        let numbers = batches.withLock { $0.map { $0.map(\.number) } }
        #expect(numbers == [[0], [1, 2, 4], [3, 5], [6]])
    }

    @Test("two batches at once: an input runs beside a batch that holds nothing it is kept apart from, else after it")
    func twoAtOnce() async throws {
        let coalescer = Coalescer<Send, Int>(maxBatch: 10, concurrency: 2, apart: { $0.conversation == $1.conversation })
        let batches = Locked<[[Int]]>([])
        let (opened, open) = AsyncStream.makeStream(of: Void.self)
        let run: @Sendable ([Send]) async -> [Int] = { batch in
            batches.withLock { $0.append(batch.map(\.number)) }
            if batch.first?.number == 0 {  // a0's batch holds its place until the test lets it go
                var gate = opened.makeAsyncIterator()
                _ = await gate.next()
            }
            return batch.map(\.number)
        }
        let held = Task { await coalescer.submit(Send(conversation: "a", number: 0), run: run) }
        while batches.withLock({ $0.isEmpty }) { await Task.yield() }
        // Another conversation's input runs at once, beside the held batch.
        #expect(await coalescer.submit(Send(conversation: "b", number: 1), run: run) == 1)
        // One into the held batch's conversation waits, though a second batch could run.
        let after = Task { await coalescer.submit(Send(conversation: "a", number: 2), run: run) }
        while coalescer.queuedCount < 1 { await Task.yield() }
        #expect(batches.withLock { $0 } == [[0], [1]])
        open.yield()
        #expect(await held.value == 0)
        #expect(await after.value == 2)
        #expect(batches.withLock { $0 } == [[0], [1], [2]])
    }
}
