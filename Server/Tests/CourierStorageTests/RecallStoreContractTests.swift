// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// Recall at the storage level, on every backend.
@Suite("Storage contract: recall", .timeLimit(.minutes(5)))
struct RecallStoreContractTests {
    static let backends = StorageBackend.available
    let conversation = ConversationID.direct("alice", "bob")

    func draft(
        _ id: String,
        from sender: AccountID,
        body: String,
        replyTo: MessageID? = nil,
        quote: String? = nil
    )
        -> MessageDraft
    {
        MessageDraft(
            id: MessageID(rawValue: id),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: id),
            sender: sender,
            time: 1,
            body: body,
            replyTo: replyTo,
            quote: quote
        )
    }

    func recall(_ target: MessageID, by requester: AccountID, id: String) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: id),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: "recall:\(target)"),
            sender: requester,
            time: 2,
            body: "",
            recall: WireRecallNotice(messageID: target, sender: "alice", recalledBy: requester, mode: .twoWay)
        )
    }

    @Test(
        "a recall is a log entry; the body, its quotes and its unread count go; repeats are idempotent",
        arguments: backends
    )
    func recall(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            _ = try await store.append(draft("m1", from: "alice", body: "secret"))
            _ = try await store.append(draft("m2", from: "bob", body: "re", replyTo: "m1", quote: "secret"))
            #expect(try await store.unreadCounts(of: "bob") == [conversation: 1])

            let first = try await store.recall(recall("m1", by: "alice", id: "n1"), rules: .members)
            #expect(!first.isDuplicate && first.message.seq == 3 && first.message.recall?.messageID == "m1")
            let log = try await store.messages(in: conversation, after: .zero, limit: 10)
            #expect(log.map(\.seq) == [1, 2, 3])
            #expect(log[0].body.isEmpty && log[0].isRecalled && log[1].quote == nil && log[1].replyTo == "m1")
            #expect(try await store.unreadCounts(of: "bob").isEmpty)

            let repeated = try await store.recall(recall("m1", by: "alice", id: "n1-again"), rules: .members)
            #expect(repeated.isDuplicate && repeated.message == first.message)
            await #expect(throws: StorageError.alreadyRecalled) {
                try await store.recall(recall("m1", by: "bob", id: "n1-bob"), rules: .app)
            }
            #expect(try await store.messages(in: conversation, after: .zero, limit: 10).count == 3)
        }
    }

    @Test(
        "two requesters recalling one message at once: one recall lands, the other is refused, one notice in the log",
        arguments: backends
    )
    func racingRecalls(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            // Each round a new message, recalled by its sender and by the other account at the same moment: the
            // second recall must find the first one's tombstone (SQLite's single writer; PostgreSQL's conversation row
            // lock, taken before the recalled message is read).
            for round in 0..<20 {
                let target = MessageID(rawValue: "m\(round)")
                _ = try await store.append(draft(target.rawValue, from: "alice", body: "secret \(round)"))
                async let byAlice = outcome(of: recall(target, by: "alice", id: "a\(round)"), on: store)
                async let byBob = outcome(of: recall(target, by: "bob", id: "b\(round)"), on: store)
                let outcomes = await [byAlice, byBob]
                #expect(outcomes.filter { $0 == nil }.count == 1, "round \(round): \(outcomes)")
                #expect(outcomes.contains(.alreadyRecalled), "round \(round): \(outcomes)")
            }
            let notices = try await store.messages(in: conversation, after: .zero, limit: 100).filter { $0.recall != nil }
            #expect(notices.count == 20)
            #expect(Set(notices.compactMap { $0.recall?.messageID }).count == 20)
        }
    }

    /// `nil` when the recall landed, else the error it was refused with.
    func outcome(of entry: MessageDraft, on store: any CourierStore) async -> StorageError? {
        do {
            // The other requester is the app's backend: either may recall the message.
            _ = try await store.recall(entry, rules: entry.sender == "alice" ? .members : .app)
            return nil
        } catch {
            return error
        }
    }
}
