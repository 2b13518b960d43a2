// Courier — Apache-2.0
import CourierStorage
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// The contract every backend must meet. Each test runs against every available backend: SQLite in memory and on
/// a file always (PostgreSQL joins when its backend lands).
@Suite("Storage contract")
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
        let store = try backend.open()
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

    @Test("a repeated (sender, clientId) returns the original and stores nothing", arguments: backends)
    func idempotentAppend(backend: StorageBackend) async throws {
        let store = try backend.open()
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

    @Test("the first message of a direct conversation needs both accounts to exist", arguments: backends)
    func unknownAccount(backend: StorageBackend) async throws {
        let store = try backend.open()
        try await store.registerAccount("alice", at: 0)
        await #expect(throws: StorageError.accountNotFound("bob")) { try await store.append(draft("c")) }
        #expect(try await store.conversation(conversation) == nil)
    }

    @Test("the delivery watermark only moves forward and never past the last message", arguments: backends)
    func monotonicWatermark(backend: StorageBackend) async throws {
        let store = try backend.open()
        try await store.registerAccount("alice", at: 0)
        try await store.registerAccount("bob", at: 0)
        for index in 1...3 {
            _ = try await store.append(draft("c\(index)", at: Timestamp(milliseconds: Int64(index * 10))))
        }

        let forward = try await store.advanceDelivered("bob", in: conversation, to: 2)
        let stale = try await store.advanceDelivered("bob", in: conversation, to: 1)
        let duplicate = try await store.advanceDelivered("bob", in: conversation, to: 2)

        #expect(forward == WatermarkChange(watermark: Watermark(seq: 2, time: 20), advanced: true))
        #expect(stale == WatermarkChange(watermark: Watermark(seq: 2, time: 20), advanced: false))
        #expect(duplicate.advanced == false)
        await #expect(throws: StorageError.seqBeyondLastMessage(last: 3)) {
            try await store.advanceDelivered("bob", in: conversation, to: 4)
        }
        let receipts = try await store.conversation(conversation)?.receipts
        #expect(receipts == [MemberReceipts(account: "bob", delivered: Watermark(seq: 2, time: 20), read: .zero)])
    }

    @Test("history pages backwards and sync pages forwards by seq", arguments: backends)
    func paging(backend: StorageBackend) async throws {
        let store = try backend.open()
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

/// A storage backend the contract suite runs against.
struct StorageBackend: CustomTestStringConvertible, Sendable {
    let name: String
    let open: @Sendable () throws -> any CourierStore
    var testDescription: String { name }

    static var available: [StorageBackend] {
        [
            StorageBackend(name: "sqlite-memory") { try SQLiteStore(location: .inMemory) },
            StorageBackend(name: "sqlite-file") {
                let folder = try TemporaryFolder()
                return FolderBoundStore(
                    store: try SQLiteStore(location: .file(folder.path + "/c.sqlite")),
                    folder: folder
                )
            },
        ]
    }
}
