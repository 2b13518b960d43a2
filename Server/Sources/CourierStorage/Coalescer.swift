// Courier — Apache-2.0

/// Runs what concurrent callers hand in as batches, one batch at a time: what arrives while a batch is under way goes
/// into the next one. SQLite's group commit (one transaction, one fsync, for every write queued meanwhile) and
/// PostgreSQL's batched appends (one statement and one round trip for the sends of many devices, ADR 0035) are both
/// this, with a different batch.
///
/// No task is spawned. A caller that finds fewer than `concurrency` batches under way, and nothing it is kept apart
/// from under way or queued, leads: it runs a batch of its own input and the oldest inputs queued (at most `maxBatch`
/// in all), answers every caller in it, and hands the lead to the oldest caller still queued that may run now, which
/// runs the next batch the same way. So every caller waits for at most the
/// batches queued before its own plus its own, however steady the load. `run` must finish whatever happens to the
/// leading task: a cancelled leader would otherwise fail the inputs of others (SQLite's runs on GRDB's writer queue;
/// PostgreSQL's answers a failure by sending each input down its own path).
package final class Coalescer<Input: Sendable, Output: Sendable>: Sendable {
    private struct State {
        var queue: [Entry] = []
        /// Batches under way.
        var leaders = 0
        /// The inputs of the batches under way (and of a caller handed the lead, before its batch is formed).
        var running: [Entry] = []
    }

    private let state = Locked(State())
    /// The most inputs in one batch.
    package let maxBatch: Int
    /// The most batches under way at once: 1 when they take turns on one writer (SQLite); more where one batch may
    /// wait for another's locks and the rest should not wait behind it (PostgreSQL).
    package let concurrency: Int
    /// Whether two inputs may not share a batch, nor run in two batches at once: the later one waits for a later batch
    /// (as does everything queued after it that is kept apart from it), so their order holds.
    private let apart: @Sendable (Input, Input) -> Bool

    package init(
        maxBatch: Int,
        concurrency: Int = 1,
        apart: @escaping @Sendable (Input, Input) -> Bool = { _, _ in false }
    ) {
        precondition(maxBatch > 0 && concurrency > 0)
        self.maxBatch = maxBatch
        self.concurrency = concurrency
        self.apart = apart
    }

    /// Inputs waiting for a batch (tests).
    package var queuedCount: Int { state.withLock { $0.queue.count } }

    /// Runs `input` in the next batch that can take it; returns its output once that batch has run. `queued` is called
    /// once the input has its place: with one batch at a time, inputs queued later run after it (in its batch or a
    /// later one). `run` gets a batch's inputs in the order they were queued and returns one output for each, in that
    /// order; the leader of a batch runs it with its own `run` (every caller of one coalescer passes the same work).
    package func submit(
        _ input: Input,
        queued: (@Sendable () -> Void)? = nil,
        run: @Sendable ([Input]) async -> [Output]
    ) async -> Output {
        let entry = Entry(input)
        let leads = state.withLock { state -> Bool in
            guard state.leaders < concurrency, !isKeptApart(entry, from: state.running),
                !isKeptApart(entry, from: state.queue)
            else {
                state.queue.append(entry)
                return false
            }
            state.leaders += 1
            state.running.append(entry)
            return true
        }
        queued?()
        if leads { await lead(entry, run) }
        while true {
            switch await entry.outcome() {
            case .done(let output): return output
            case .lead: await lead(entry, run)
            }
        }
    }

    /// Runs `own` (out of the queue: no other batch takes it) with the oldest queued inputs that may share its batch and
    /// run beside the batches under way, answers them, then passes the lead on.
    private func lead(_ own: Entry, _ run: @Sendable ([Input]) async -> [Output]) async {
        let batch = state.withLock { state -> [Entry] in
            var taken = [own]
            var left: [Entry] = []
            var scanned = 0
            for entry in state.queue {
                // A full batch leaves the rest in order, unexamined: the scan stays bounded by the batch, not the queue.
                guard taken.count < maxBatch else { break }
                scanned += 1
                if !isKeptApart(entry, from: state.running), !isKeptApart(entry, from: taken),
                    !isKeptApart(entry, from: left)
                {
                    taken.append(entry)
                } else {
                    left.append(entry)
                }
            }
            state.queue = left + state.queue.dropFirst(scanned)
            state.running.append(contentsOf: taken.dropFirst())
            return taken
        }
        let outputs = await run(batch.map(\.input))
        precondition(outputs.count == batch.count, "a batch's run returns one output per input")
        for (entry, output) in zip(batch, outputs) { entry.finish(.done(output)) }
        let next = state.withLock { state -> Entry? in
            let done = Set(batch.map(ObjectIdentifier.init))
            state.running.removeAll { done.contains(ObjectIdentifier($0)) }
            // The oldest queued caller that nothing under way, nor queued before it, keeps apart.
            var passed: [Entry] = []
            for (index, entry) in state.queue.enumerated() {
                if !isKeptApart(entry, from: state.running), !isKeptApart(entry, from: passed) {
                    state.queue.remove(at: index)
                    state.running.append(entry)
                    return entry
                }
                passed.append(entry)
            }
            state.leaders -= 1
            return nil
        }
        next?.finish(.lead)
    }

    private func isKeptApart(_ entry: Entry, from others: [Entry]) -> Bool {
        others.contains { apart($0.input, entry.input) }
    }

    /// One queued input, and what its caller is told: its output, or that it leads the next batch.
    private final class Entry: Sendable {
        enum Outcome: Sendable {
            case done(Output)
            case lead
        }

        let input: Input
        private let slot = Locked<(Outcome?, CheckedContinuation<Outcome, Never>?)>((nil, nil))

        init(_ input: Input) { self.input = input }

        func finish(_ outcome: Outcome) {
            let waiter = slot.withLock { slot -> CheckedContinuation<Outcome, Never>? in
                guard let waiter = slot.1 else {
                    slot.0 = outcome
                    return nil
                }
                slot.1 = nil
                return waiter
            }
            waiter?.resume(returning: outcome)
        }

        /// The next outcome; each is delivered once.
        func outcome() async -> Outcome {
            await withCheckedContinuation { continuation in
                let ready = slot.withLock { slot -> Outcome? in
                    if let outcome = slot.0 {
                        slot.0 = nil
                        return outcome
                    }
                    slot.1 = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
