// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// Group membership under concurrency, on every backend.
/// The limit is generous: the concurrent group reads take about 12 s alone (three backends), but 150–185 s were seen in
/// the full suite, starved by the other tests on two cores (a test's limit cannot exceed its suite's). They assert
/// correctness, not speed.
@Suite("Storage contract: groups", .timeLimit(.minutes(8)))
struct GroupStoreContractTests {
    static let backends = StorageBackend.available
    let group = ConversationID.group("crew")

    func change(_ number: Int, by actor: AccountID, _ change: WireGroupChange) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: "g-\(number)"),
            conversation: group,
            clientID: ClientMessageID(rawValue: "g-\(number)"),
            sender: actor,
            time: Timestamp(milliseconds: Int64(number)),
            body: "",
            group: change
        )
    }

    @Test("concurrent batches of members' reads in one group count every read once, and none of them fails", arguments: backends)
    func concurrentReadBatches(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let members = (0..<240).map { AccountID(rawValue: "m\($0)") }
            try await store.registerAccounts(["alice"] + members, at: 0)
            _ = try await store.createGroup(
                change(0, by: "alice", WireGroupChange(action: .created, accounts: members)),
                members: members
            )
            // The app's backend reporting reads 20 members at a time, twelve requests at once (as
            // `POST /v1/conversations/{id}/reads` does), after each round of messages that ask for receipts: every
            // batch counts each member on the same rows, in whatever order its transaction meets them.
            let batches = stride(from: 0, to: members.count, by: 20).map { Array(members[$0..<$0 + 20]) }
            var asked: [Seq] = []
            for round in 0..<3 {
                for index in 0..<10 {
                    let id = "r\(round)-\(index)"
                    asked.append(
                        try await store.append(
                            MessageDraft(
                                id: MessageID(rawValue: id), conversation: group, clientID: ClientMessageID(rawValue: id),
                                sender: "alice", time: Timestamp(milliseconds: Int64(100 + round)), body: "?",
                                needsReadReceipt: true
                            )
                        ).message.seq
                    )
                }
                let last = try #require(asked.last)
                let roundSeqs = Array(asked.suffix(10))
                // Each member reads up to a different message first, then to the last: the batches' updates touch
                // different rows of the round in different orders.
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for (number, batch) in batches.enumerated() {
                        tasks.addTask {
                            let reads = batch.enumerated().flatMap { offset, reader in
                                let first = roundSeqs[(number + offset) % 10]
                                return [first, last].map {
                                    ResolvedRead(
                                        reader: reader, conversation: group, target: .upTo($0), isShared: true,
                                        time: Timestamp(milliseconds: 1_000)
                                    )
                                }
                            }
                            _ = try await store.markReads(reads)
                        }
                    }
                    try await tasks.waitForAll()
                }
            }
            let counts = try await store.receiptCounts(in: group, seqs: asked)
            #expect(counts.count == asked.count)
            #expect(counts.values.allSatisfy { $0.readCount == members.count && $0.unreadCount == 0 }, "\(counts.values.map(\.readCount))")
        }
    }

    @Test(
        "a delivery racing a member's removal never blocks its re-adding (no receipt row outlives a membership)",
        arguments: backends
    )
    func deliveryRacingRemoval(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account: AccountID in ["alice", "bob"] { try await store.registerAccount(account, at: 0) }
            _ = try await store.createGroup(
                change(0, by: "alice", WireGroupChange(action: .created, accounts: ["bob"])),
                members: ["bob"]
            )
            var number = 1
            for _ in 0..<60 {
                let removal = change(number, by: "alice", WireGroupChange(action: .removed, accounts: ["bob"]))
                number += 1
                let last = try await store.conversation(group)?.lastSeq ?? Seq(1)
                // bob's devices acknowledge delivery while the owner removes him: either may win each time.
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for _ in 0..<6 {
                        tasks.addTask {
                            _ = try? await store.advanceDelivered("bob", in: group, to: last, at: Timestamp(milliseconds: 1))
                        }
                    }
                    tasks.addTask { _ = try await store.changeGroup(removal) }
                    try await tasks.waitForAll()
                }
                // Whatever the order was, no position of his outlives his membership, and adding him back works.
                let receipts = try await store.conversation(group)?.receipts ?? []
                #expect(!receipts.contains { $0.account == "bob" }, "\(receipts)")
                let readd = change(number, by: "alice", WireGroupChange(action: .added, accounts: ["bob"]))
                number += 1
                _ = try await store.changeGroup(readd)
                #expect(try await store.member("bob", of: group) != nil)
            }
        }
    }

    @Test("dismissal: the owner only; one last entry; every membership ends; the id is not given out again", arguments: backends)
    func dismissal(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account: AccountID in ["alice", "bob", "carol"] { try await store.registerAccount(account, at: 0) }
            _ = try await store.createGroup(
                change(0, by: "alice", WireGroupChange(action: .created, accounts: ["bob", "carol"])),
                members: ["bob", "carol"]
            )
            _ = try await store.changeGroup(change(1, by: "alice", WireGroupChange(action: .roleChanged, accounts: ["bob"], role: .admin)))
            let asked = try await store.append(
                MessageDraft(
                    id: "m-1", conversation: group, clientID: "m-1", sender: "carol",
                    time: Timestamp(milliseconds: 10), body: "hi", needsReadReceipt: true
                )
            ).message
            _ = try await store.markRead(
                ResolvedRead(reader: "bob", conversation: group, target: .upTo(asked.seq), isShared: true, time: Timestamp(milliseconds: 11))
            )
            #expect(try await store.receiptCounts(in: group, seqs: [asked.seq])[asked.seq]?.readCount == 1)
            #expect(try await store.conversations(of: "bob").contains { $0.id == group })
            #expect(try await store.owner(of: group) == "alice")

            // Neither an admin nor a member may dismiss; nothing is appended by a refusal.
            for actor: AccountID in ["bob", "carol"] {
                await #expect(throws: StorageError.groupRefused(.notPermitted)) {
                    try await store.changeGroup(change(2, by: actor, WireGroupChange(action: .dismissed, accounts: [])))
                }
            }
            #expect(try await store.conversation(group)?.lastSeq == asked.seq)

            let dismissal = change(3, by: "alice", WireGroupChange(action: .dismissed, accounts: []))
            let dismissed = try await store.changeGroup(dismissal)
            #expect(dismissed.message.group == WireGroupChange(action: .dismissed, accounts: []))
            #expect(dismissed.message.seq == asked.seq.next && !dismissed.isDuplicate)
            // A retry of the same request answers the same entry.
            let retried = try await store.changeGroup(dismissal)
            #expect(retried.isDuplicate && retried.message.id == dismissed.message.id)

            // The group is gone for every request; its log keeps the dismissal as its last entry.
            #expect(try await store.groupExists(group) == false)
            #expect(try await store.owner(of: group) == nil)
            #expect(try await store.member("alice", of: group) == nil)
            let page = try await store.members(of: group, after: nil, limit: 10)
            #expect(page.members.isEmpty && page.total == 0)
            #expect(try await store.membership(of: group, before: nil).accounts.isEmpty)
            // Who the dismissal went to stays readable: every member just before it.
            let audience = try await store.membership(of: group, before: dismissed.message.seq)
            #expect(Set(audience.accounts) == ["alice", "bob", "carol"] && audience.version == dismissed.message.seq)
            for account: AccountID in ["alice", "bob", "carol"] {
                #expect(try await !store.conversations(of: account).contains { $0.id == group }, "\(account)")
            }
            #expect(try await store.messages(in: group, before: nil, limit: 1).last?.id == dismissed.message.id)
            await #expect(throws: StorageError.groupRefused(.groupNotFound)) {
                try await store.changeGroup(change(4, by: "alice", WireGroupChange(action: .added, accounts: ["bob"])))
            }
            await #expect(throws: StorageError.self) {
                try await store.append(
                    MessageDraft(
                        id: "m-2", conversation: group, clientID: "m-2", sender: "alice",
                        time: Timestamp(milliseconds: 20), body: "anyone?"
                    )
                )
            }
            // A recall checked before the dismissal committed lands after none: the dismissal stays the last entry.
            let recall = MessageDraft(
                id: "r-1", conversation: group, clientID: "r-1", sender: "alice", time: Timestamp(milliseconds: 21),
                body: "", recall: WireRecallNotice(messageID: asked.id, sender: "carol", recalledBy: "alice", mode: .twoWay)
            )
            await #expect(throws: StorageError.conversationNotFound(group)) {
                try await store.recall(recall, rules: .members)
            }
            await #expect(throws: StorageError.groupRefused(.alreadyExists)) {
                try await store.createGroup(change(5, by: "bob", WireGroupChange(action: .created, accounts: [])), members: [])
            }
            #expect(try await store.messages(in: group, before: nil, limit: 1).last?.id == dismissed.message.id)
        }
    }
}
