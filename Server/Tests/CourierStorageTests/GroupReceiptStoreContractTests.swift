// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// Group read receipts and what a recall leaves of a message, at the storage level, on every backend: the same facts
/// give the same counts, lists, pages and copies whichever backend stores them.
@Suite("Storage contract: group receipts and recall", .timeLimit(.minutes(5)))
struct GroupReceiptStoreContractTests {
    static let backends = StorageBackend.available
    let group = ConversationID.group("crew")
    let audience: [AccountID] = ["bob", "carol", "dave", "erin"]

    func message(_ id: String, in conversation: ConversationID, asks: Bool = false, body: String = "?") -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: id), conversation: conversation, clientID: ClientMessageID(rawValue: id),
            sender: "alice", time: 100, body: body, needsReadReceipt: asks
        )
    }

    func recall(_ target: MessageID, in conversation: ConversationID, mode: RecallMode) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: "recall-\(target)"), conversation: conversation,
            clientID: ClientMessageID(rawValue: "recall:\(target)"), sender: "alice", time: 200, body: "",
            recall: WireRecallNotice(messageID: target, sender: "alice", recalledBy: "alice", mode: mode)
        )
    }

    func read(_ reader: AccountID, _ target: ResolvedRead.Target, at time: Int64, note: String? = nil) -> ResolvedRead {
        ResolvedRead(
            reader: reader, conversation: group, target: target, isShared: true, time: Timestamp(milliseconds: time),
            note: note
        )
    }

    func list(_ kind: ReceiptListKind, of seq: Seq, accounts: [AccountID]? = nil, limit: Int = 10) -> ReceiptListQuery {
        ReceiptListQuery(group: group, seq: seq, sender: "alice", list: kind, accounts: accounts, cursor: nil, limit: limit)
    }

    /// alice's group of four; she sends a message asking for receipts and one that does not. bob acks the first with
    /// a note, carol reads up to it, dave's device has it, erin has done nothing.
    func setUp(_ store: any CourierStore) async throws -> (asked: Seq, plain: Seq) {
        try await store.registerAccounts(["alice"] + audience, at: 0)
        _ = try await store.createGroup(
            MessageDraft(
                id: "g-0", conversation: group, clientID: "g-0", sender: "alice", time: 1, body: "",
                group: WireGroupChange(action: .created, accounts: audience)
            ),
            members: audience
        )
        let asked = try await store.append(message("m1", in: group, asks: true)).message.seq
        let plain = try await store.append(message("m2", in: group)).message.seq
        _ = try await store.markRead(read("bob", .seqs([asked]), at: 1_000, note: "on my way"))
        _ = try await store.markRead(read("carol", .upTo(asked), at: 2_000))
        _ = try await store.advanceDelivered("dave", in: group, to: asked, at: Timestamp(milliseconds: 1_500))
        return (asked, plain)
    }

    @Test("counts, read, unread and delivered lists of a message asking for receipts, filtered and paged", arguments: backends)
    func countsAndLists(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let (asked, plain) = try await setUp(store)
            let counts = try await store.receiptCounts(in: group, seqs: [asked, plain])
            #expect(Array(counts.keys) == [asked], "a message that did not ask has no counts")
            let tally = try #require(counts[asked])
            #expect(tally.messageID == "m1" && tally.sender == "alice")
            #expect([tally.audience, tally.readCount, tally.unreadCount] == [4, 2, 2])

            let readers = try await store.receiptList(list(.read, of: asked))
            #expect(Set(readers.entries.map(\.account)) == ["bob", "carol"] && readers.total == 2 && readers.next == nil)
            let bob = readers.entries.first { $0.account == "bob" }
            #expect(bob?.time == Timestamp(milliseconds: 1_000) && bob?.content == "on my way")
            #expect(readers.entries.allSatisfy { $0.time != nil })
            let unread = try await store.receiptList(list(.unread, of: asked))
            #expect(unread.entries.map(\.account) == ["dave", "erin"] && unread.total == 2)
            #expect(unread.entries.allSatisfy { $0.time == nil })
            // Read implies delivered (SPEC §9.5): the readers are in the delivered list with dave; erin is not.
            let delivered = try await store.receiptList(list(.delivered, of: asked))
            #expect(Set(delivered.entries.map(\.account)) == ["bob", "carol", "dave"] && delivered.total == 3)
            #expect(delivered.entries.first { $0.account == "dave" }?.time == Timestamp(milliseconds: 1_500))

            // Restricted to some accounts (NIM accountSet): the others are left out of the page and of the total.
            let someReaders = try await store.receiptList(list(.read, of: asked, accounts: ["dave", "bob"]))
            #expect(someReaders.entries.map(\.account) == ["bob"] && someReaders.total == 1)
            let someUnread = try await store.receiptList(list(.unread, of: asked, accounts: ["dave", "bob", "nobody"]))
            #expect(someUnread.entries.map(\.account) == ["dave"] && someUnread.total == 1)

            // Paged one at a time: every reader once, the total on every page, no cursor after the last.
            for kind in [ReceiptListKind.read, .unread, .delivered] {
                var query = list(kind, of: asked, limit: 1)
                var seen: [AccountID] = []
                var totals: Set<Int> = []
                for _ in 0..<10 {
                    let page = try await store.receiptList(query)
                    #expect(page.entries.count <= 1)
                    seen += page.entries.map(\.account)
                    totals.insert(page.total)
                    guard let next = page.next else { break }
                    query = query.with(cursor: next)
                }
                let whole = try await store.receiptList(list(kind, of: asked))
                #expect(seen.count == whole.total && Set(seen) == Set(whole.entries.map(\.account)), "\(kind): \(seen)")
                #expect(totals == [whole.total], "\(kind)")
            }
        }
    }

    @Test("a recalled message's receipts are dropped: no counts, and a later read announces nothing for it", arguments: backends)
    func recallDropsReceipts(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            let (asked, _) = try await setUp(store)
            _ = try await store.recall(recall("m1", in: group, mode: .twoWay), rules: .members)
            #expect(try await store.receiptCounts(in: group, seqs: [asked]).isEmpty)
            let change = try await store.markRead(read("dave", .all, at: 3_000))
            #expect(change.receipts.isEmpty, "a read after the recall counts nothing: \(change.receipts)")
            #expect(try await store.receiptCounts(in: group, seqs: [asked]).isEmpty)
            // The readers' positions stay: they are positions in the log, where the tombstone is.
            #expect(change.own.unreadCount == 0)
        }
    }

    @Test("a one-way recall keeps the sender's copy for the sender's account alone; a two-way recall keeps none", arguments: backends)
    func senderCopy(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccounts(["alice", "bob"], at: 0)
            let direct = ConversationID.direct("alice", "bob")
            _ = try await store.append(message("kept", in: direct, body: "see you at 10"))
            _ = try await store.append(message("gone", in: direct, body: "see you at 11"))
            _ = try await store.recall(recall("kept", in: direct, mode: .oneWay), rules: .members)
            _ = try await store.recall(recall("gone", in: direct, mode: .twoWay), rules: .members)

            let log = try await store.messages(in: direct, after: .zero, limit: 10)
            #expect(log.filter(\.isRecalled).map(\.id) == ["kept", "gone"])
            #expect(log.filter(\.isRecalled).allSatisfy { $0.body.isEmpty }, "the stored message is a tombstone for everyone")
            let copies = try await store.senderCopies(of: ["kept", "gone"], sender: "alice")
            #expect(copies == ["kept": SenderCopy(body: "see you at 10", quote: nil)])
            #expect(try await store.senderCopies(of: ["kept", "gone"], sender: "bob").isEmpty)
        }
    }
}
