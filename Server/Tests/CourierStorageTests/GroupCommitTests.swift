// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@testable import CourierStorageSQLite

/// The group commit's promises to its callers: nobody is answered before the transaction holding its write commits,
/// nobody waits behind more than the groups queued before it, and a cancelled leader fails nobody.
@Suite("Group commit", .timeLimit(.minutes(5)))
struct GroupCommitTests {
    static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (n INTEGER NOT NULL)") }
        return queue
    }

    @Test("under steady load the caller that led a group returns after its own group, not after the queue drains")
    func leaderReturnsAfterItsGroup() async throws {
        let database = try Self.database()
        let commits = Atomic<Int>(0)
        let observer = CommitObserver()
        observer.add { _ in commits.add(1, ordering: .relaxed) }
        let commit = GroupCommit(writer: database, maxGroupSize: 4, commits: observer)
        let gate = Gate()
        // The first write holds the writer until 40 more are queued behind it.
        let first = Task {
            try await commit.write { db in
                gate.wait()
                try db.execute(sql: "INSERT INTO t VALUES (0)")
            }
            return commits.load(ordering: .relaxed)
        }
        // The first write holds the writer before the others queue (otherwise some of them may commit first, and
        // fewer than 40 would ever wait behind it).
        while !gate.isWaiting { await Task.yield() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 1...40 {
                group.addTask { _ = try await commit.write { db in try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [index]) } }
            }
            while commit.queuedCount < 40 { await Task.yield() }
            gate.open()
            // Before, the leader wrote group after group until the queue was empty (11 here) before returning.
            let committedWhenLeaderReturned = try await first.value
            #expect(committedWhenLeaderReturned < 11, "the leader returned after \(committedWhenLeaderReturned) groups")
            try await group.waitForAll()
        }
        #expect(commits.load(ordering: .relaxed) == 11, "1 group for the first write, then 40 in groups of 4")
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 41)
    }

    @Test("cancelling the caller that leads does not fail the writes queued behind it, nor its own")
    func cancelledLeader() async throws {
        let database = try Self.database()
        let commit = GroupCommit(writer: database, maxGroupSize: 4)
        let gate = Gate()
        let leader = Task {
            try await commit.write { db in
                gate.wait()
                try db.execute(sql: "INSERT INTO t VALUES (0)")
            }
        }
        while commit.queuedCount < 1 && !gate.isWaiting { await Task.yield() }
        let followers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 1...12 {
                    group.addTask { try await commit.write { db in try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [index]) } }
                }
                try await group.waitForAll()
            }
        }
        while commit.queuedCount < 12 { await Task.yield() }
        leader.cancel()
        gate.open()
        try await leader.value
        try await followers.value
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 13)
    }
}

/// Blocks a database operation (on GRDB's queue, not on a Swift task) until opened.
final class Gate: Sendable {
    private let condition = NSCondition()
    /// A pthread mutex (`Locked`), which ThreadSanitizer sees, not `Synchronization.Mutex`.
    private let state = Locked<(open: Bool, waiting: Bool)>((false, false))

    var isWaiting: Bool { state.withLock { $0.waiting } }

    func wait() {
        condition.lock()
        state.withLock { $0.waiting = true }
        while !state.withLock({ $0.open }) { condition.wait() }
        condition.unlock()
    }

    func open() {
        condition.lock()
        state.withLock { $0.open = true }
        condition.broadcast()
        condition.unlock()
    }
}
