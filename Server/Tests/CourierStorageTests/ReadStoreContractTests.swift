// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierStoragePostgres
import CourierStorageSQLite
import CourierTestSupport
import CourierWire
import Testing

/// Read receipts, unread counts and privacy settings, on every backend.
@Suite("Storage contract: reads", .timeLimit(.minutes(5)))
struct ReadStoreContractTests {
    static let backends = StorageBackend.available
    let conversation = ConversationID.direct("alice", "bob")

    /// alice and bob exist; bob sent messages 1…`count` except those in `fromAlice`, at time 100 × seq.
    func seed(_ store: any CourierStore, count: Int64, fromAlice: Set<Int64> = []) async throws {
        try await store.registerAccount("alice", at: 0)
        try await store.registerAccount("bob", at: 0)
        for seq in 1...count {
            let sender: AccountID = fromAlice.contains(seq) ? "alice" : "bob"
            _ = try await store.append(
                MessageDraft(
                    id: MessageID(rawValue: "m\(seq)"),
                    conversation: conversation,
                    clientID: ClientMessageID(rawValue: "c\(seq)"),
                    sender: sender,
                    time: Timestamp(milliseconds: 100 * seq),
                    body: "body \(seq)"
                )
            )
        }
    }

    func read(_ target: ResolvedRead.Target, shared: Bool = true, by reader: AccountID = "alice") -> ResolvedRead {
        ResolvedRead(
            reader: reader,
            conversation: conversation,
            target: target,
            isShared: shared,
            time: Timestamp(milliseconds: 1_000)
        )
    }

    @Test("message acks above the watermark are kept one by one, then fold into it", arguments: backends)
    func messageAcks(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 6, fromAlice: [3])
            #expect(try await store.unreadCounts(of: "alice") == [conversation: 5])
            var change = try await store.markRead(read(.seqs([4, 2])))
            #expect(change.own.watermark.seq == .zero && change.own.readSeqs == [2, 4])
            #expect(change.own.unreadCount == 3 && change.ownChanged)
            #expect(change.shared?.readSeqs == [2, 4])
            // Reading 1 folds 1, 2, alice's own 3 and 4 into the watermark.
            change = try await store.markRead(read(.seqs([1])))
            #expect(change.own.watermark == Watermark(seq: 4, time: 400) && change.own.readSeqs.isEmpty)
            #expect(change.own.unreadCount == 2)
            // A duplicate is a no-op that returns the current state.
            let repeated = try await store.markRead(read(.seqs([2])))
            #expect(!repeated.ownChanged && repeated.shared == nil && repeated.own == change.own)
            // Naming the newest message reads that one alone (ADR 0038): 5 stays unread.
            change = try await store.markRead(read(.seqs([6])))
            #expect(change.own.watermark.seq == 4 && change.own.readSeqs == [6] && change.own.unreadCount == 1)
            #expect(try await store.unreadCounts(of: "alice") == [conversation: 1])
            // Then 5: both fold into the watermark.
            change = try await store.markRead(read(.seqs([5])))
            #expect(change.own.watermark.seq == 6 && change.own.readSeqs.isEmpty && change.own.unreadCount == 0)
            #expect(try await store.unreadCounts(of: "alice").isEmpty)
        }
    }

    @Test(
        "PostgreSQL: a recall that commits while a read waits for the reader's row is counted by that read",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func recallWhileTheReadWaits() async throws {
        try await StorageBackend.withPostgresStore { store, url in
            try await seed(store, count: 10)
            // alice's kept count: 8 unread in (2, 10].
            #expect(try await store.markRead(read(.upTo(2))).own.unreadCount == 8)
            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // Another transaction holds alice's row: her next read takes its snapshot (the head at 10), then
                // waits for the row.
                try await session.execute("BEGIN")
                try await session.execute(
                    "SELECT 1 FROM receipt WHERE conversation_id = '\(conversation.rawValue)' AND account = 'alice' FOR UPDATE"
                )
                let reading = Task { try await store.markRead(read(.upTo(5))) }
                while try await session.integer(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ) == 0 {
                    await Task.yield()
                }
                // Meanwhile bob recalls message 4, which her read covers: it stops counting, and its notice is 11.
                let notice = MessageDraft(
                    id: MessageID(rawValue: "r4"), conversation: conversation, clientID: ClientMessageID(rawValue: "r4"),
                    sender: "bob",
                    time: Timestamp(milliseconds: 1_100), body: "",
                    recall: WireRecallNotice(messageID: MessageID(rawValue: "m4"), sender: "bob", recalledBy: "bob", mode: .twoWay)
                )
                _ = try await store.recall(notice, rules: .app)
                try await session.execute("COMMIT")
                // Unread after her read, up to the head it saw: 6…10. Moved from the kept count without the recall,
                // the answer was 6 (8, less 3 and 5 read, plus nothing arrived up to 10).
                #expect(try await reading.value.own.unreadCount == 5)
            }
        }
    }

    @Test(
        "a reader who reads each message behind a faster sender is answered the count the conversation list shows, through recalls, deletions, clears and reads out of order",
        arguments: backends
    )
    func unreadCountAsTheReaderGoes(backend: StorageBackend) async throws {
        // The read's answer is moved along from the count the last read was answered (ADR 0042); the conversation
        // list's count is one query over the log. Every read's answer must be the list's count after it.
        try await backend.withStore { store in
            try await seed(store, count: 3)
            var random = SplitMix64(seed: 48)
            var last: Int64 = 3
            var nextRead: Int64 = 1
            var sent: [Int64: MessageID] = [:]
            for seq in 1...last { sent[seq] = MessageID(rawValue: "m\(seq)") }
            for step in 0..<400 {
                let roll = Int.random(in: 0..<100, using: &random)
                switch roll {
                case 0..<40:
                    // Someone sends: mostly bob, sometimes alice (her own entries never count for her).
                    let sender: AccountID = roll < 34 ? "bob" : "alice"
                    let id = MessageID(rawValue: "s\(step)")
                    let appended = try await store.append(
                        MessageDraft(
                            id: id, conversation: conversation, clientID: ClientMessageID(rawValue: "s\(step)"),
                            sender: sender, time: Timestamp(milliseconds: 100 * (last + 1)), body: "step \(step)"
                        )
                    )
                    last = appended.message.seq.rawValue
                    sent[last] = id
                case 40..<44:
                    // bob recalls one of his, possibly one alice's kept count covers.
                    guard let seq = sent.keys.filter({ $0 <= last }).randomElement(using: &random),
                        let target = sent[seq]
                    else { continue }
                    sent[seq] = nil
                    let notice = MessageDraft(
                        id: MessageID(rawValue: "r\(step)"), conversation: conversation,
                        clientID: ClientMessageID(rawValue: "r\(step)"), sender: "bob",
                        time: Timestamp(milliseconds: 100 * (last + 1)), body: "",
                        recall: WireRecallNotice(messageID: target, sender: "bob", recalledBy: "bob", mode: .twoWay)
                    )
                    if let recalled = try? await store.recall(notice, rules: .app) {
                        last = max(last, recalled.message.seq.rawValue)
                    }
                case 44..<47:
                    var change = ViewWrite(account: "alice", conversation: conversation, now: 1)
                    change.deleteSeqs = [Seq(Int64.random(in: 1...last, using: &random))]
                    _ = try await store.changeView(change)
                case 47:
                    var change = ViewWrite(account: "alice", conversation: conversation, now: 1)
                    change.clear = true
                    _ = try await store.changeView(change)
                default:
                    // alice reads: mostly the next message as it arrives, sometimes one out of order, sometimes
                    // up to a seq; privately now and then.
                    let target: ResolvedRead.Target
                    switch roll {
                    case 48..<52: target = .seqs([Seq(Int64.random(in: 1...last, using: &random))])
                    case 52..<55: target = .upTo(Seq(Int64.random(in: 1...last, using: &random)))
                    default:
                        guard nextRead <= last else { continue }
                        target = .seqs([Seq(nextRead)])
                        nextRead += 1
                    }
                    let change = try await store.markRead(read(target, shared: roll % 7 != 0))
                    let listed = try await store.unreadCounts(of: "alice")[conversation] ?? 0
                    #expect(change.own.unreadCount == listed, "step \(step): read \(target)")
                }
            }
        }
    }

    @Test(
        "a message deleted for the reader after its later ones were acked: the next ack folds the own position over it, and says so; the shared one does not",
        arguments: backends
    )
    func foldOverADeletion(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 3)
            var change = try await store.markRead(read(.seqs([2])))
            #expect(change.own.watermark.seq == .zero && change.own.readSeqs == [2])
            var deletion = ViewWrite(account: "alice", conversation: conversation, now: Timestamp(milliseconds: 2_000))
            deletion.deleteSeqs = [1]
            _ = try await store.changeView(deletion)
            // Acking 2 again moves nothing by itself; the fold over the deleted 1 does, and is written and answered as
            // a move. Peers do not learn of the deletion: the shared position stays.
            change = try await store.markRead(read(.seqs([2])))
            #expect(change.ownChanged && change.own.watermark.seq == 2 && change.own.readSeqs.isEmpty, "\(change)")
            #expect(change.shared == nil)
            #expect(try await store.conversation(conversation)?.receipts.first { $0.account == "alice" }?.read.seq == .zero)
        }
    }

    @Test("conversation and time reads move the watermark forward only", arguments: backends)
    func watermarkReads(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 5)
            var change = try await store.markRead(read(.upToTime(350)))
            #expect(change.own.watermark == Watermark(seq: 3, time: 300) && change.own.unreadCount == 2)
            change = try await store.markRead(read(.upTo(2)))
            #expect(!change.ownChanged && change.own.watermark.seq == 3)
            change = try await store.markRead(read(.all))
            #expect(change.own.watermark.seq == 5 && change.own.unreadCount == 0)
            await #expect(throws: StorageError.seqBeyondLastMessage(last: 5)) {
                try await store.markRead(read(.upTo(6)))
            }
            // Read implies delivered.
            let receipts = try await store.conversation(conversation)?.receipts.first { $0.account == "alice" }
            #expect(receipts?.delivered.seq == 5 && receipts?.read.seq == 5)
        }
    }

    @Test("a private read clears the reader's unread count but peers see the shared position", arguments: backends)
    func privateReads(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 4)
            _ = try await store.markRead(read(.upTo(1)))
            let change = try await store.markRead(read(.upTo(3), shared: false))
            #expect(change.ownChanged && change.shared == nil && change.own.unreadCount == 1)
            _ = try await store.markRead(read(.seqs([4]), shared: false))
            let shared = try await store.conversation(conversation)?.receipts.first { $0.account == "alice" }
            #expect(shared?.read.seq == 1 && shared?.readSeqs == [])
            let own = try await store.conversations(of: "alice").first?.receipts.first { $0.account == "alice" }
            #expect(own?.read.seq == 4)
            #expect(try await store.unreadCounts(of: "alice").isEmpty)
            #expect(try await store.conversations(of: "bob").first?.receipts.first { $0.account == "alice" } == shared)
            #expect(try await store.readState(of: "alice", in: conversation).watermark.seq == 4)
            // A later shared read of something already read privately is still shared.
            let again = try await store.markRead(read(.seqs([3])))
            #expect(!again.ownChanged && again.shared?.readSeqs == [3])
        }
    }

    @Test("a message's time never goes backwards along seq, so a time read covers a prefix", arguments: backends)
    func monotonicTime(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await store.registerAccount("alice", at: 0)
            try await store.registerAccount("bob", at: 0)
            for (index, time) in [500, 400, 600].enumerated() {
                _ = try await store.append(
                    MessageDraft(
                        id: MessageID(rawValue: "t\(index)"),
                        conversation: conversation,
                        clientID: ClientMessageID(rawValue: "t\(index)"),
                        sender: "bob",
                        time: Timestamp(milliseconds: Int64(time)),
                        body: ""
                    )
                )
            }
            let times = try await store.messages(in: conversation, after: .zero, limit: 10).map(\.time)
            #expect(times == [500, 500, 600])
            let change = try await store.markRead(read(.upToTime(450)))
            #expect(change.own.watermark.seq == .zero && !change.ownChanged)
        }
    }

    @Test("concurrent reads converge on the furthest position", arguments: backends)
    func concurrentReads(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 40)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for seq in 1...40 {
                    group.addTask {
                        _ = try await store.markRead(
                            read(seq % 2 == 0 ? .upTo(Seq(Int64(seq))) : .seqs([Seq(Int64(seq))]))
                        )
                    }
                }
                try await group.waitForAll()
            }
            let state = try await store.readState(of: "alice", in: conversation)
            #expect(state.watermark.seq == 40 && state.readSeqs.isEmpty && state.unreadCount == 0)
        }
    }

    @Test("read-receipt settings default to on and are stored per account and conversation", arguments: backends)
    func settings(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 1)
            #expect(
                try await store.readReceiptSettings(of: "alice") == .init(sendReadReceipts: true, conversations: [:])
            )
            try await store.setSendReadReceipts(false, for: "alice", in: nil)
            try await store.setSendReadReceipts(true, for: "alice", in: conversation)
            try await store.setSendReadReceipts(false, for: "alice", in: conversation)
            #expect(
                try await store.readReceiptSettings(of: "alice")
                    == .init(sendReadReceipts: false, conversations: [conversation: false])
            )
            #expect(try await store.readReceiptSettings(of: "bob").sendReadReceipts)
            // Many accounts at once, as far as one conversation goes: accounts with no setting are left out.
            let other = ConversationID.direct("alice", "carol")
            try await store.setSendReadReceipts(true, for: "bob", in: other)
            #expect(
                try await store.readReceiptSettings(of: ["alice", "bob"], in: conversation)
                    == ["alice": .init(sendReadReceipts: false, conversations: [conversation: false])]
            )
        }
    }

    @Test("a batch of reads is one transaction: every change in order, or nothing", arguments: backends)
    func batchedReads(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            try await seed(store, count: 4, fromAlice: [4])
            // bob's read names a seq past the newest message: alice's read, first in the batch, is not kept either.
            await #expect(throws: StorageError.self) {
                try await store.markReads([read(.upTo(3)), read(.upTo(9), by: "bob")])
            }
            #expect(try await store.readState(of: "alice", in: conversation).watermark.seq == .zero)
            let changes = try await store.markReads([read(.upTo(3)), read(.upTo(4), by: "bob")])
            #expect(changes.map(\.own.watermark.seq) == [3, 4] && changes.map(\.own.unreadCount) == [0, 0])
            #expect(changes.allSatisfy(\.ownChanged) && changes.map(\.shared?.read.seq) == [3, 4])
            #expect(try await store.unreadCounts(of: "alice").isEmpty)
        }
    }
}

@Suite("Reading positions")
struct ReadPositionTests {
    @Test(
        "compaction moves the watermark to the highest read seq below the first message still unread",
        arguments: [
            // watermark, read one by one, what counts as unread in the probe's range, watermark after, reads left
            (0, [1, 2, 4], [1, 2, 3, 4], 2, [4]),
            (0, [2, 3], [2, 3], 3, []),  // 1 is the reader's own
            (0, [3], [2, 3], 0, [3]),  // 2 is someone else's, unread
            (5, [7], [7], 7, []),  // 6 and 8 are the reader's own
            (0, [1, 3], [1, 3], 3, []),  // 2 is a group change: it never counts
            (0, [1, 3], [1, 2, 3], 1, [3]),  // 2 counts: a read of 1 and 3 leaves 2 unread
        ] as [(Int64, [Int64], [Int64], Int64, [Int64])]
    )
    func compaction(watermark: Int64, read: [Int64], countable: [Int64], expected: Int64, remaining: [Int64]) {
        var position = ReadPosition(watermark: Seq(watermark), readSeqs: read.map { Seq($0) })
        let probe = position.compactionProbe
        #expect(probe?.range == Seq(watermark).next...Seq(read.max()!) && probe?.limit == read.count + 1)
        position.compact(countable: countable.map { Seq($0) })
        #expect(position.watermark == Seq(expected))
        #expect(position.readSeqs == remaining.map { Seq($0) })
    }

    @Test("a message read ack reads exactly those messages, the newest among them too; nothing moves backwards")
    func exactlyThoseForwardOnly() {
        var position = ReadPosition(watermark: 5, readSeqs: [3, 8])
        #expect(position.readSeqs == [8])
        let stale = position.read(upTo: 4)
        let repeated = position.read([2, 8])
        #expect(!stale && !repeated)
        let moved = position.read([9])
        #expect(moved && position.readSeqs == [8, 9])
        // 10 is the conversation's newest: 6 and 7 stay unread.
        let newest = position.read([10])
        #expect(newest && position.watermark == 5 && position.readSeqs == [8, 9, 10])
        let upTo = position.read(upTo: 10)
        #expect(upTo && position.watermark == 10 && position.readSeqs.isEmpty)
    }
}
