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
/// groups are written in the order their writes were queued (nobody waits behind more than the groups queued before
/// it), and a cancelled caller fails nobody.
@Suite("Group commit", .timeLimit(.minutes(5)))
struct GroupCommitTests {
    static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (n INTEGER NOT NULL)") }
        return queue
    }

    @Test("writes queued while a group is written go in later groups, in the order queued, each answered after its own commit")
    func groupsInQueueOrder() async throws {
        let database = try Self.database()
        let commits = Locked(0)
        let observer = CommitObserver()
        observer.add { _ in commits.withLock { $0 += 1 } }
        let commit = GroupCommit(writer: database, maxGroupSize: 4, commits: observer)
        let gate = ThreadGate()
        // The first write holds the store's thread until 40 more are queued behind it.
        let first = Task {
            try await commit.write { db in
                gate.wait()
                try db.execute(sql: "INSERT INTO t VALUES (0)")
                return db.lastInsertedRowID
            }
        }
        while !gate.isWaiting { await Task.yield() }
        let answers = try await withThrowingTaskGroup(of: (Int, Int64, Int).self) { group in
            // Queued one after another, so their order in the queue is their index.
            for index in 1...40 {
                group.addTask {
                    let row = try await commit.write { db in
                        try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [index])
                        return db.lastInsertedRowID
                    }
                    return (index, row, commits.withLock { $0 })
                }
                while commit.queuedCount < index { await Task.yield() }
            }
            gate.open()
            var answers: [(Int, Int64, Int)] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        #expect(try await first.value == 1)
        #expect(commits.withLock { $0 } == 11, "1 group for the first write, then 40 in groups of 4")
        for (index, row, committedWhenAnswered) in answers {
            // Written in queue order, and answered only once the group that holds it (the 2nd to the 11th) committed.
            #expect(row == Int64(index + 1))
            #expect(committedWhenAnswered >= (index - 1) / 4 + 2, "write \(index) was answered before its group committed")
        }
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 41)
    }

    @Test("cancelling the caller whose write is being written fails neither it nor the writes queued behind it")
    func cancelledLeader() async throws {
        let database = try Self.database()
        let commit = GroupCommit(writer: database, maxGroupSize: 4)
        let gate = ThreadGate()
        let leader = Task {
            try await commit.write { db in
                gate.wait()
                try db.execute(sql: "INSERT INTO t VALUES (0)")
            }
        }
        // The leader's group is being written (alone: nothing else is queued yet) before the followers queue; had
        // they queued sooner, some of them could have joined its group.
        while !gate.isWaiting { await Task.yield() }
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
