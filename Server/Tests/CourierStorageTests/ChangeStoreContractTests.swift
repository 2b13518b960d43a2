// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierTestSupport
import CourierWire
import Foundation
import Logging
import Testing

/// ADR 0017: what changed for an account since a cursor, on every backend — and on PostgreSQL, where transactions
/// commit in another order than they took their stamps, that a change committed after a sync read its cursor is
/// never skipped by the next one.
@Suite("Storage contract: change stamps", .timeLimit(.minutes(5)))
struct ChangeStoreContractTests {
    static let backends = StorageBackend.available

    func draft(_ body: String, from sender: AccountID, to conversation: ConversationID) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: "m-\(body)"),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: body),
            sender: sender,
            time: 1,
            body: body
        )
    }

    func changed(_ store: any CourierStore, of account: AccountID, since cursor: ChangeCursor) async throws
        -> [String: Seq]
    {
        Dictionary(
            uniqueKeysWithValues: try await store.changedConversations(of: account, since: cursor.stamp).map {
                ($0.state.id.rawValue, $0.changedAfter)
            }
        )
    }

    @Test("a conversation changed for an account when its log grew or a receipt in its view moved; nothing else", arguments: backends)
    func changesSinceACursor(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account in ["alice", "bob", "carol"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let aliceBob = ConversationID.direct("alice", "bob")
            let bobCarol = ConversationID.direct("bob", "carol")
            _ = try await store.append(draft("1", from: "alice", to: aliceBob))
            _ = try await store.append(draft("2", from: "alice", to: aliceBob))
            let start = try await store.changeCursor()
            for account in ["alice", "bob", "carol"] as [AccountID] {
                #expect(try await changed(store, of: account, since: start).isEmpty)
            }

            // An append: the conversation changed for both members, from the entry appended.
            _ = try await store.append(draft("3", from: "carol", to: bobCarol))
            _ = try await store.append(draft("4", from: "carol", to: bobCarol))
            #expect(try await changed(store, of: "bob", since: start) == [bobCarol.rawValue: 0])
            #expect(try await changed(store, of: "carol", since: start) == [bobCarol.rawValue: 0])
            #expect(try await changed(store, of: "alice", since: start).isEmpty)

            // A read in a direct chat: a change for both members (each sees the other's position), with no entry.
            let afterAppends = try await store.changeCursor()
            #expect(afterAppends.stamp > start.stamp && afterAppends.storeID == start.storeID)
            _ = try await store.markRead(
                ResolvedRead(reader: "bob", conversation: aliceBob, target: .all, isShared: true, time: 5)
            )
            #expect(try await changed(store, of: "alice", since: afterAppends) == [aliceBob.rawValue: 2])
            #expect(try await changed(store, of: "bob", since: afterAppends) == [aliceBob.rawValue: 2])
            #expect(try await changed(store, of: "carol", since: afterAppends).isEmpty)

            // A delivery receipt, and one more entry: only entries from the new one on are owed.
            let afterRead = try await store.changeCursor()
            _ = try await store.advanceDelivered("bob", in: bobCarol, to: 2, at: 6)
            #expect(try await changed(store, of: "carol", since: afterRead) == [bobCarol.rawValue: 2])
            _ = try await store.append(draft("5", from: "bob", to: bobCarol))
            #expect(try await changed(store, of: "carol", since: afterRead) == [bobCarol.rawValue: 2])
            #expect(try await changed(store, of: "bob", since: afterRead) == [bobCarol.rawValue: 2])

            // A stale receipt moves nothing, and is no change.
            let quiet = try await store.changeCursor()
            _ = try await store.advanceDelivered("bob", in: bobCarol, to: 1, at: 7)
            for account in ["alice", "bob", "carol"] as [AccountID] {
                #expect(try await changed(store, of: account, since: quiet).isEmpty)
            }
        }
    }

    @Test("in a group, a member's read is a change for that member alone; a message is one for every member", arguments: backends)
    func groupReads(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account in ["alice", "bob", "carol"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let group = ConversationID.group("crew")
            _ = try await store.createGroup(
                MessageDraft(
                    id: "g-0", conversation: group, clientID: "g-0", sender: "alice", time: 1, body: "",
                    group: WireGroupChange(action: .created, accounts: ["bob", "carol"])
                ),
                members: ["bob", "carol"]
            )
            let created = try await store.changeCursor()
            _ = try await store.append(draft("hello", from: "alice", to: group))
            for account in ["alice", "bob", "carol"] as [AccountID] {
                #expect(try await changed(store, of: account, since: created) == [group.rawValue: 1])
            }
            let sent = try await store.changeCursor()
            _ = try await store.markRead(ResolvedRead(reader: "carol", conversation: group, target: .all, isShared: true, time: 5))
            #expect(try await changed(store, of: "carol", since: sent) == [group.rawValue: 2])
            #expect(try await changed(store, of: "bob", since: sent).isEmpty)
            #expect(try await changed(store, of: "alice", since: sent).isEmpty)
        }
    }

    @Test(
        "PostgreSQL: an append that took its stamp before a sync read its cursor and committed after it reaches the next sync",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func lateCommitIsNotSkipped() async throws {
        try await StorageBackend.withPostgresStore { store, url in
            for account in ["alice", "bob", "carol"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let late = ConversationID.direct("alice", "bob")
            let other = ConversationID.direct("alice", "carol")
            _ = try await store.append(draft("early", from: "alice", to: late))
            let before = try await store.changeCursor()

            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // The store's own append of "late" stops after it stamped its rows: its transaction started, and will
                // commit, when the test says.
                let appending = try await session.holdingAppends(withBody: "late", key: 4242) {
                    try await store.append(draft("late", from: "alice", to: late))
                }

                // Meanwhile a later transaction commits, and a sync reads its cursor and the changes.
                _ = try await store.append(draft("other", from: "alice", to: other))
                let cursor = try await store.changeCursor()
                let seen = try await changed(store, of: "alice", since: before)
                #expect(seen.keys.contains(other.rawValue))
                #expect(!seen.keys.contains(late.rawValue), "not committed yet, so not visible")

                // The late transaction commits: the next sync, from that cursor, must bring it.
                try await session.release(4242)
                let appended = try await appending.value
                #expect(try await changed(store, of: "bob", since: cursor) == [late.rawValue: Seq(appended.message.seq.rawValue - 1)])
                #expect(try await changed(store, of: "alice", since: cursor)[late.rawValue] == Seq(appended.message.seq.rawValue - 1))
            }
        }
    }

    @Test(
        "PostgreSQL: a long transaction in another database on the server does not hold the cursor back",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func otherDatabasesDoNotHoldTheCursor() async throws {
        try await PostgresTestDatabase.withDatabase { elsewhere in
            try await PostgresTestDatabase.withSession(toDatabaseAt: elsewhere) { session in
                // Another application's transaction, open for the whole test (transaction ids are cluster-wide).
                try await session.execute("BEGIN")
                _ = try await session.integer("SELECT pg_current_xact_id()::text::bigint")
                try await StorageBackend.withPostgresStore { store in
                    for account in ["alice", "bob"] as [AccountID] { try await store.registerAccount(account, at: 0) }
                    let conversation = ConversationID.direct("alice", "bob")
                    _ = try await store.append(draft("1", from: "alice", to: conversation))
                    let cursor = try await store.changeCursor()
                    #expect(try await changed(store, of: "bob", since: cursor).isEmpty, "nothing changed since")
                    _ = try await store.append(draft("2", from: "alice", to: conversation))
                    #expect(try await changed(store, of: "bob", since: cursor) == [conversation.rawValue: 1])
                }
                try await session.execute("ROLLBACK")
            }
        }
    }
}
