// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire

/// Reads of one reader in one conversation that wait for the same group commit become one write (ADR 0037): the first
/// leads and queues the write; reads that come while it waits join it, and the write applies all of them in order —
/// one look at the reader's position, one upsert, one unread count, one event. The leader is answered with the change;
/// each read that joined is answered from the same commit with the reader's state after it (its ack), and publishes
/// nothing (the leader's change tells the others what all of them read).
///
/// Only reads that name messages or a seq join (a note, `content`, stays with its own read), and only while the
/// leader's write has not begun. When the joint write fails, every read is written again on its own, so a read that
/// would be refused alone (a seq past the end, a member removed) is refused alone and fails none of the others.
final class PendingReads: Sendable {
    struct Key: Hashable, Sendable {
        let reader: AccountID
        let conversation: ConversationID
        let isShared: Bool
        /// Message acks and reads up to a seq do not join each other: the change says which kind of read it was.
        let namesMessages: Bool
    }

    /// What a read that joined is told once the joint write is over.
    enum Outcome: Sendable {
        case written(ReadOutcome)
        case writeAlone
    }

    final class Entry: Sendable {
        fileprivate struct State {
            var reads: [ResolvedRead]
            var taken = false
            var outcome: Outcome?
            var waiters: [CheckedContinuation<Outcome, Never>] = []
        }
        fileprivate let state: Locked<State>
        fileprivate init(_ read: ResolvedRead) { state = Locked(State(reads: [read])) }

        /// The outcome of the joint write, once known.
        func outcome() async -> Outcome {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Outcome? in
                    if let outcome = state.outcome { return outcome }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }

        /// Tells the reads that joined how the joint write went.
        func finish(_ outcome: Outcome) {
            let waiters = state.withLock { state in
                state.outcome = outcome
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: outcome) }
        }
    }

    private let entries = Locked<[Key: Entry]>([:])

    static func key(of read: ResolvedRead) -> Key? {
        guard read.note == nil, read.isAnnounced else { return nil }
        switch read.target {
        case .seqs, .upTo:
            let namesMessages = if case .seqs = read.target { true } else { false }
            return Key(
                reader: read.reader,
                conversation: read.conversation,
                isShared: read.isShared,
                namesMessages: namesMessages
            )
        case .upToTime, .all: return nil
        }
    }

    /// Joins `read` to the read of its key still waiting for its write (`.joined`), or makes it the leader of one.
    func enter(_ read: ResolvedRead, key: Key) -> (entry: Entry, leads: Bool) {
        entries.withLock { entries in
            if let entry = entries[key] {
                let joined = entry.state.withLock { state -> Bool in
                    guard !state.taken else { return false }
                    state.reads.append(read)
                    return true
                }
                if joined { return (entry, false) }
            }
            let entry = Entry(read)
            entries[key] = entry
            return (entry, true)
        }
    }

    /// In the leader's write (or after it failed, whether or not it got that far): the reads to apply, in the order
    /// they came; nothing joins after this.
    func take(_ entry: Entry, key: Key) -> [ResolvedRead] {
        entries.withLock { entries in
            if entries[key] === entry { entries[key] = nil }
            return entry.state.withLock { state in
                state.taken = true
                return state.reads
            }
        }
    }

    /// Reads that joined a leader and wait for its write (tests).
    var joinedCount: Int {
        entries.withLock { entries in entries.values.reduce(0) { $0 + $1.state.withLock { $0.reads.count - 1 } } }
    }
}
