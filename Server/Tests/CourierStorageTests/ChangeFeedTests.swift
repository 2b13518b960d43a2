// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierTestSupport
import Logging
import Testing

/// SPEC §9.9 for the PostgreSQL change feed: notifications from other nodes queue up to a bound; past it the node
/// does not grow, it drops the backlog, reconnects its listener and asks every device to sync (nothing is lost).
@Suite(
    "PostgreSQL change feed",
    .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL"),
    .timeLimit(.minutes(5))
)
struct ChangeFeedTests {
    @Test("a backlog past its bound makes the listener reconnect and ask for a resync, instead of growing")
    func backlogBounded() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let feed = try PostgresChangeFeed(url: url, nodeID: "this-node", logger: Logger(label: "test"))
            let (resyncs, resync) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await feed.run(
                        // A fan-out that never finishes: every change stays in the backlog.
                        onChange: { _ in try? await Task.sleep(for: .seconds(3600)) },
                        onResync: { resync.yield() }
                    )
                }
                var iterator = resyncs.makeAsyncIterator()
                _ = await iterator.next()  // listening
                try await PostgresTestDatabase.notifyChanges(
                    toDatabaseAt: url,
                    conversation: "d:alice:bob",
                    origin: "other-node",
                    count: 10_200
                )
                let second = await iterator.next()
                #expect(second != nil, "the overflow made the listener reconnect and ask devices to sync")
                // (The notifications are changes this node reads: `ChangeTests` decodes their shape.)
                group.cancelAll()
            }
        }
    }
}
