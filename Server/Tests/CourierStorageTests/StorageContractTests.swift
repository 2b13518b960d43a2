// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Logging
import Testing

/// The contract every backend must meet. Each test runs against every available backend: SQLite in memory and on
/// a file always (PostgreSQL joins when its backend lands).
@Suite("Storage contract", .timeLimit(.minutes(5)))
struct StorageContractTests {
    static let backends = StorageBackend.available
    let conversation = ConversationID.direct("alice", "bob")

    func draft(
        _ clientID: String,
        from sender: AccountID = "alice",
        body: String = "x",
        at time: Timestamp = 1
    )
        -> MessageDraft
    {
        MessageDraft(
            id: MessageID(rawValue: "m-\(sender)-\(clientID)"),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: clientID),
            sender: sender,
            time: time,
            body: body
        )
    }

    @Test("seq stays gapless and unique under concurrent senders", arguments: backends)
    func gaplessUnderConcurrency(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            let perSender = 100
            try await withThrowingTaskGroup(of: Void.self) { group in
                for sender in ["alice", "bob"] as [AccountID] {
                    for worker in 0..<4 {
                        group.addTask {
                            for index in 0..<(perSender / 4) {
                                _ = try await store.append(draft("w\(worker)-\(index)", from: sender))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let messages = try await store.messages(in: conversation, after: .zero, limit: 1000)
            #expect(messages.map(\.seq.rawValue) == Array(1...Int64(2 * perSender)))
            #expect(try await store.conversation(conversation)?.lastSeq == Seq(Int64(2 * perSender)))
        }
    }

    @Test("a repeated (sender, clientId) returns the original and stores nothing", arguments: backends)
    func idempotentAppend(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            let first = try await store.append(draft("same", body: "original"))
            let second = try await store.append(
                MessageDraft(
                    id: "other-id",
                    conversation: conversation,
                    clientID: "same",
                    sender: "alice",
                    time: 9,
                    body: "changed"
                )
            )
            #expect(!first.isDuplicate && second.isDuplicate)
            #expect(second.message == first.message)
            #expect(try await store.messages(in: conversation, after: .zero, limit: 10).count == 1)
        }
    }

    @Test("concurrent retries of one (sender, clientId) store one message and all get it", arguments: backends)
    func idempotentUnderConcurrentRetries(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            let results = try await withThrowingTaskGroup(of: AppendOutcome.self) { group in
                for attempt in 0..<8 {
                    group.addTask {
                        try await store.append(
                            MessageDraft(
                                id: MessageID(rawValue: "attempt-\(attempt)"),
                                conversation: conversation,
                                clientID: "retried",
                                sender: "alice",
                                time: 1,
                                body: "once"
                            )
                        )
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(results.map(\.message)).count == 1)
            #expect(results.filter { !$0.isDuplicate }.count == 1)
            #expect(try await store.messages(in: conversation, after: .zero, limit: 10).count == 1)
        }
    }

    @Test("concurrent writes where some fail keep every other write, gapless", arguments: backends)
    func failuresAreIsolated(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let target: ConversationID = index.isMultiple(of: 2) ? conversation : .direct("alice", "zed")
                        let draft = MessageDraft(
                            id: MessageID(rawValue: "i\(index)"),
                            conversation: target,
                            clientID: ClientMessageID(rawValue: "i\(index)"),
                            sender: "alice",
                            time: 1,
                            body: "x"
                        )
                        do {
                            _ = try await store.append(draft)
                            return true
                        } catch StorageError.accountNotFound("zed") {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 20)
            let stored = try await store.messages(in: conversation, after: .zero, limit: 100)
            #expect(stored.map(\.seq.rawValue) == Array(1...20))
            #expect(try await store.conversation(.direct("alice", "zed")) == nil)
        }
    }

    @Test("the first message of a direct conversation needs both accounts to exist", arguments: backends)
    func unknownAccount(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            await #expect(throws: StorageError.accountNotFound("bob")) { try await store.append(draft("c")) }
            #expect(try await store.conversation(conversation) == nil)
        }
    }

    @Test("the delivery watermark only moves forward and never past the last message", arguments: backends)
    func monotonicWatermark(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            for index in 1...3 {
                _ = try await store.append(draft("c\(index)", at: Timestamp(milliseconds: Int64(index * 10))))
            }

            let forward = try await store.advanceDelivered(
                "bob",
                in: conversation,
                to: 2,
                at: Timestamp(milliseconds: 1_000)
            )
            let stale = try await store.advanceDelivered(
                "bob",
                in: conversation,
                to: 1,
                at: Timestamp(milliseconds: 1_000)
            )
            let duplicate = try await store.advanceDelivered(
                "bob",
                in: conversation,
                to: 2,
                at: Timestamp(milliseconds: 1_000)
            )

            // The write returns the change it made, built in its transaction: the moved watermark at the delivery's time.
            let at = Timestamp(milliseconds: 1_000)
            #expect(forward == DeliveryOutcome("bob", in: conversation, watermark: Watermark(seq: 2, time: 20), advanced: true, at: at))
            #expect(forward.change == .delivered(conversation, account: "bob", watermark: Watermark(seq: 2, time: 20), at: at))
            #expect(stale == DeliveryOutcome("bob", in: conversation, watermark: Watermark(seq: 2, time: 20), advanced: false, at: at))
            #expect(duplicate.advanced == false)
            await #expect(throws: StorageError.seqBeyondLastMessage(last: 3)) {
                try await store.advanceDelivered("bob", in: conversation, to: 4, at: Timestamp(milliseconds: 1_000))
            }
            let receipts = try await store.conversation(conversation)?.receipts
            #expect(receipts == [MemberReceipts(account: "bob", delivered: Watermark(seq: 2, time: 20), read: .zero)])
        }
    }

    @Test("history pages backwards and sync pages forwards by seq", arguments: backends)
    func paging(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            for index in 1...10 { _ = try await store.append(draft("c\(index)")) }
            #expect(try await store.messages(in: conversation, before: nil, limit: 3).map(\.seq) == [8, 9, 10])
            #expect(try await store.messages(in: conversation, before: 8, limit: 3).map(\.seq) == [5, 6, 7])
            #expect(try await store.messages(in: conversation, after: 7, limit: 10).map(\.seq) == [8, 9, 10])
            #expect(try await store.conversations(of: "bob").map(\.id) == [conversation])
            #expect(try await store.conversations(of: "carol").isEmpty)
        }
    }
}

/// A storage backend the contract suite runs against: SQLite in memory and on a file always, PostgreSQL (a fresh
/// database per test) when `COURIER_TEST_POSTGRES_URL` is set.
struct StorageBackend: CustomTestStringConvertible, Sendable {
    let name: String
    let withStore: @Sendable (@Sendable (any CourierStore) async throws -> Void) async throws -> Void
    var testDescription: String { name }

    static var available: [StorageBackend] {
        var backends = [
            StorageBackend(name: "sqlite-memory") { body in try await body(try SQLiteStore(location: .inMemory)) },
            StorageBackend(name: "sqlite-file") { body in
                let folder = try TemporaryFolder()
                try await body(try SQLiteStore(location: .file(folder.path + "/c.sqlite")))
            },
        ]
        if PostgresTestDatabase.runsPerBackendTests {
            backends.append(StorageBackend(name: "postgres") { body in try await withPostgresStore(body) })
        }
        return backends
    }

    static func withPostgresStore(_ body: @Sendable (any CourierStore) async throws -> Void) async throws {
        try await withPostgresStore { store, _ in try await body(store) }
    }

    /// A migrated PostgreSQL store on a fresh database, and the database's URL (for a session of the test's own).
    static func withPostgresStore(_ body: @Sendable (PostgresStore, String) async throws -> Void) async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let store = try PostgresStore(
                url: url,
                timeouts: .patient,
                logger: Logger(label: "courier.test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.migrate()
                try await body(store, url)
            }
        }
    }
}

extension StorageContractTests {
    @Test("undelivered recipients: the audience without the sender, below its delivery watermark, with tokens, paged", arguments: backends)
    func undeliveredRecipients(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account in ["alice", "bob"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let token = PushToken(device: "phone", platform: .fcm, token: "t-bob", sandbox: false, updatedAt: 3)
            try await store.setPushToken(token, of: "bob", device: "phone")
            let first = try await store.append(draft("1"))
            let second = try await store.append(draft("2"))
            func recipients(_ seq: Seq, after cursor: AccountID? = nil) async throws -> [PushRecipient] {
                try await store.undeliveredRecipients(
                    in: conversation,
                    seq: seq,
                    excluding: ["alice"],
                    after: cursor,
                    limit: 10
                )
            }
            #expect(try await recipients(first.message.seq) == [PushRecipient(account: "bob", tokens: [token])])
            _ = try await store.advanceDelivered("bob", in: conversation, to: first.message.seq, at: 5)
            #expect(try await recipients(first.message.seq).isEmpty)
            #expect(try await recipients(second.message.seq).map(\.account) == ["bob"])
            #expect(try await recipients(second.message.seq, after: "bob").isEmpty)
        }
    }
}
