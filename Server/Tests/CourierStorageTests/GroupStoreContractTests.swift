// Courier — Apache-2.0
import CourierStorage
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// Group membership under concurrency, on every backend.
@Suite("Storage contract: groups", .timeLimit(.minutes(3)))
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
}
