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

/// PostgreSQL writes the direct messages of many devices in one statement per batch (ADR 0035): what arrives while a
/// batch is written goes into the next one. The promises stay those of one append at a time — a gapless log per
/// conversation, each answer what is stored, each event and notification naming its entry — and a batch that fails
/// writes nothing and sends each of its appends down its own path.
@Suite(
    "PostgreSQL batched appends",
    .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL"),
    .timeLimit(.minutes(5))
)
struct PostgresBatchedAppendTests {
    static let logger = Logger(label: "courier.test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func draft(_ id: String, in conversation: ConversationID, from sender: AccountID, body: String) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: id),
            conversation: conversation,
            clientID: ClientMessageID(rawValue: id),
            sender: sender,
            time: 1_000,
            body: body
        )
    }

    /// Direct conversations `a<i>`–`b<i>`, each with a first message (which creates it, outside any batch).
    static func conversations(_ count: Int, in store: PostgresStore) async throws -> [ConversationID] {
        var conversations: [ConversationID] = []
        for index in 0..<count {
            let (a, b) = (AccountID(rawValue: "a\(index)"), AccountID(rawValue: "b\(index)"))
            try await store.registerAccount(a, at: 0)
            try await store.registerAccount(b, at: 0)
            let conversation = ConversationID.direct(a, b)
            _ = try await store.append(draft("first-\(index)", in: conversation, from: a, body: "first"))
            conversations.append(conversation)
        }
        return conversations
    }

    /// Waits until `count` appends wait for a batch (a state, not a time).
    static func waitUntilQueued(_ count: Int, in store: PostgresStore) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while store.queuedDirectAppends < count {
            guard ContinuousClock.now < deadline else { throw Timeout() }
            await Task.yield()
        }
    }

    /// A store writing as node "writer" on a fresh database, a feed of node "observer" listening to it (`changes`), and a
    /// webhook endpoint wanting `events`.
    static func withObservedStore(
        events: [WebhookEventType],
        _ body: @Sendable (PostgresStore, String, AsyncStream<ChangeNotice>) async throws -> Void
    ) async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let store = try PostgresStore(url: url, nodeID: "writer", timeouts: .patient, logger: Self.logger)
            let feed = try PostgresChangeFeed(url: url, nodeID: "observer", logger: Self.logger)
            let (changes, change) = AsyncStream.makeStream(of: ChangeNotice.self)
            let (listening, listens) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                group.addTask { try await feed.run(onChange: { change.yield($0) }, onResync: { listens.yield() }) }
                defer { group.cancelAll() }
                try await store.migrate()
                var ready = listening.makeAsyncIterator()
                _ = await ready.next()
                try await store.createWebhookEndpoint(
                    WebhookEndpoint(id: "whep_1", url: "http://127.0.0.1:9/", events: events, secret: "whsec_x", createdAt: 0)
                )
                try await body(store, url, changes)
            }
        }
    }

    struct Timeout: Error {}

    @Test("a direct conversation another node appended to since this node's last batch: the next batch writes after the head as it is, and its change names what is stored")
    func headMovedByAnotherNode() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let one = try PostgresStore(url: url, nodeID: "one", timeouts: .patient, logger: Self.logger)
            let two = try PostgresStore(url: url, nodeID: "two", timeouts: .patient, logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await one.run() }
                group.addTask { try await two.run() }
                defer { group.cancelAll() }
                try await one.migrate()
                let conversation = try await Self.conversations(1, in: one)[0]
                // Node one's batch writes seq 2 and remembers it; node two then writes 3.
                let second = try await one.append(Self.draft("x2", in: conversation, from: "a0", body: "two"))
                let third = try await two.append(Self.draft("x3", in: conversation, from: "b0", body: "three"))
                let fourth = try await one.append(Self.draft("x4", in: conversation, from: "a0", body: "four"))
                #expect([second, third, fourth].map(\.message.seq) == [Seq(2), Seq(3), Seq(4)])
                #expect(fourth.change == .appended(fourth.message, membershipSeq: nil, pushes: true))
                let log = try await one.messages(in: conversation, after: .zero, limit: 10)
                #expect(log.map(\.seq) == [Seq(1), Seq(2), Seq(3), Seq(4)])
                #expect(log.last == fourth.message && log.map(\.body).suffix(3) == ["two", "three", "four"])
            }
        }
    }

    @Test("sends queued while a batch is written go in the next batches: one statement each, every log gapless, every answer, event and notification names what is stored")
    func batches() async throws {
        try await Self.withObservedStore(events: [.messageCreated]) { store, url, changes in
            let conversations = try await Self.conversations(8, in: store)
            let commits = Locked<[Int]>([])
            store.commits.add { record in commits.withLock { $0.append(record.operations) } }
            // Bodies that spell what the statement completes in the payloads written beforehand.
            let bodies = [#"","seq":0,"time":""#, #""seq":0"#, #",\"seq\":0,\"time\":"#, "plain"]
            let results = try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // Both batches a node runs at once wait in a trigger until both participants of the 6 other
                // conversations queued a send: 12 appends, at most one per conversation in a batch.
                let held = try await session.holdingAppends(withBody: "hold", key: 35) {
                    async let first = store.append(Self.draft("held-0", in: conversations[0], from: "a0", body: "hold"))
                    async let second = store.append(Self.draft("held-1", in: conversations[1], from: "a1", body: "hold"))
                    return try await [first, second]
                }
                try await Self.waitUntil(in: session, "SELECT count(*) FROM pg_locks WHERE objid = 35 AND NOT granted", is: 2)
                let sends = try await withThrowingTaskGroup(of: AppendOutcome.self) { sending in
                    for index in 2..<8 {
                        for sender in ["a\(index)", "b\(index)"] {
                            let body = bodies[(index + sender.count) % bodies.count]
                            sending.addTask {
                                try await store.append(
                                    Self.draft("s-\(sender)", in: conversations[index], from: AccountID(rawValue: sender), body: body)
                                )
                            }
                        }
                    }
                    try await Self.waitUntilQueued(12, in: store)
                    try await session.release(35)
                    return try await sending.reduce(into: []) { $0.append($1) }
                }
                return try await held.value + sends
            }
            // Two batches at once never take one conversation, so every send is written by a batch: the two held
            // ones, then the twelve in at least two (one send per conversation in a batch) and fewer than twelve.
            let batches = commits.withLock { $0 }
            #expect(batches.reduce(0, +) == 14, "every send written by a batch: \(batches)")
            #expect(batches.count >= 4 && batches.count < 14, "fewer statements than sends: \(batches)")
            var stored: [MessageID: WireMessage] = [:]
            for conversation in conversations {
                let log = try await store.messages(in: conversation, after: .zero, limit: 10)
                #expect(log.map(\.seq.rawValue) == Array(1...Int64(log.count)), "\(conversation) is gapless")
                for message in log { stored[message.id] = message }
            }
            #expect(results.count == 14 && results.allSatisfy { !$0.isDuplicate && stored[$0.message.id] == $0.message })
            let created = try await store.webhookDeliveries(of: "whep_1", state: nil, before: nil, limit: 100)
                .filter { $0.type == .messageCreated }
                .map { try JSONDecoder().decode(EntryEventsContractTests.Envelope.self, from: Data($0.payload.utf8)) }
                .map(\.data.message)
            #expect(Set(created) == Set(stored.values), "one event per entry, naming it as stored")
            #expect(created.count == stored.count)
            var notified: [MessageID: Seq] = [:]
            for await change in changes {
                guard case .change(.appended(let entry, _, _)) = change.content else { continue }
                notified[entry.id] = entry.seq
                if notified.count == stored.count { break }
            }
            #expect(notified == stored.mapValues(\.seq), "every notification names its entry's seq")
        }
    }

    @Test("deliveries queued while a batch is written go in the next batch: every watermark moves forward once, with one event and one notification; a stale one moves nothing")
    func deliveries() async throws {
        try await Self.withObservedStore(events: [.messageDelivered]) { store, url, changes in
            let conversations = try await Self.conversations(8, in: store)
            // a2–a4 delivered already: their deliveries below move nothing, in the batches of those that move.
            for index in 2..<5 {
                _ = try await store.advanceDelivered(AccountID(rawValue: "a\(index)"), in: conversations[index], to: 1, at: 4)
            }
            let commits = Locked<[Int]>([])
            store.commits.add { record in commits.withLock { $0.append(record.operations) } }
            let changes14 = try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // Both batches a node runs at once wait in a trigger (the deliveries of b0 and b1) until both
                // members of the 6 other conversations queued a delivery.
                let held = try await session.holdingWrites(
                    on: "receipt", of: "INSERT OR UPDATE", when: "NEW.account IN ('b0', 'b1')", key: 37
                ) {
                    async let first = store.advanceDelivered("b0", in: conversations[0], to: 1, at: 5)
                    async let second = store.advanceDelivered("b1", in: conversations[1], to: 1, at: 5)
                    return try await [first, second]
                }
                try await Self.waitUntil(in: session, "SELECT count(*) FROM pg_locks WHERE objid = 37 AND NOT granted", is: 2)
                let delivered = try await withThrowingTaskGroup(of: (String, DeliveryOutcome).self) { delivering in
                    for index in 2..<8 {
                        for account in ["a\(index)", "b\(index)"] {
                            delivering.addTask {
                                let change = try await store.advanceDelivered(
                                    AccountID(rawValue: account), in: conversations[index], to: 1, at: 5
                                )
                                return (account, change)
                            }
                        }
                    }
                    try await Self.waitUntil(deliveriesQueued: 12, in: store)
                    try await session.release(37)
                    return try await delivering.reduce(into: []) { $0.append($1) }
                }
                return try await held.value.map { ("held", $0) } + delivered
            }
            #expect(changes14.count == 14 && changes14.allSatisfy { $0.1.watermark.seq == 1 })
            for (account, change) in changes14 {
                #expect(change.advanced == !["a2", "a3", "a4"].contains(account), "\(account): moved only if it was behind")
            }
            // The held batches (1 and 1), then the twelve queued in one or two batches (the two batch slots are handed
            // on as the held ones end): 9 of them moved.
            let batches = commits.withLock { $0 }
            #expect(batches.reduce(0, +) == 11 && batches.count <= 4, "\(batches)")
            // A stale delivery moves nothing and tells nobody.
            let stale = try await store.advanceDelivered("b2", in: conversations[2], to: 1, at: 9)
            #expect(!stale.advanced && stale.watermark.seq == 1)
            #expect(commits.withLock { $0 } == batches, "a stale delivery commits nothing")
            for (index, conversation) in conversations.enumerated() where index >= 2 {
                let receipts = try #require(try await store.conversation(conversation)).receipts
                #expect(receipts.filter { $0.delivered.seq == 1 }.count == 2, "both members of \(conversation)")
            }
            let events = try await store.webhookDeliveries(of: "whep_1", state: nil, before: nil, limit: 100)
            #expect(events.filter { $0.type == .messageDelivered }.count == 3 + 11, "one event per delivery that moved")
            // One notification per delivery that moved (a2–a4's earlier ones included), and none for those that did
            // not: the next after them is a later delivery's.
            _ = try await store.advanceDelivered("a0", in: conversations[0], to: 1, at: 9)
            var notified: [String] = []
            for await change in changes {
                guard case .change(.delivered(let conversation, let account, let watermark, _)) = change.content else {
                    continue
                }
                #expect(watermark.seq == 1)
                notified.append("\(conversation.rawValue) \(account.rawValue)")
                if account == "a0" { break }
            }
            #expect(notified.count == 3 + 11 + 1 && Set(notified).count == notified.count, "\(notified)")
        }
    }

    @Test("reads queued while a batch is written share the next transaction: each moves once, with one event and one notification; a refused one is refused alone")
    func reads() async throws {
        try await Self.withObservedStore(events: [.messageRead]) { store, url, changes in
            let conversations = try await Self.conversations(8, in: store)
            let commits = Locked<[Int]>([])
            store.commits.add { record in commits.withLock { $0.append(record.operations) } }
            @Sendable func read(_ index: Int, upTo seq: Int64) -> ResolvedRead {
                ResolvedRead(
                    reader: AccountID(rawValue: "b\(index)"), conversation: conversations[index],
                    target: .upTo(Seq(seq)), isShared: true, time: 5
                )
            }
            let (moved, refusal) = try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // Both batches a node runs at once wait in a trigger (the reads of b0 and b1) until the readers of
                // the 6 other conversations, and one read past the last message, queued.
                let held = try await session.holdingWrites(
                    on: "receipt", of: "INSERT OR UPDATE", when: "NEW.account IN ('b0', 'b1')", key: 38
                ) {
                    async let first = store.markRead(read(0, upTo: 1))
                    async let second = store.markRead(read(1, upTo: 1))
                    return try await [first, second]
                }
                try await Self.waitUntil(in: session, "SELECT count(*) FROM pg_locks WHERE objid = 38 AND NOT granted", is: 2)
                // a2's read past the last message: another (conversation, reader) than any other read, so it may
                // share a batch with them.
                async let refused: StorageError? = {
                    do {
                        _ = try await store.markRead(
                            ResolvedRead(reader: "a2", conversation: conversations[2], target: .upTo(5), isShared: true, time: 5)
                        )
                        return nil
                    } catch let error as StorageError {
                        return error
                    } catch {
                        return .failed("\(error)")
                    }
                }()
                let reads = try await withThrowingTaskGroup(of: ReadOutcome.self) { reading in
                    for index in 2..<8 { reading.addTask { try await store.markRead(read(index, upTo: 1)) } }
                    try await Self.waitUntil(readsQueued: 7, in: store)
                    try await session.release(38)
                    return try await reading.reduce(into: []) { $0.append($1) }
                }
                return (try await held.value + reads, await refused)
            }
            #expect(moved.count == 8 && moved.allSatisfy { $0.ownChanged && $0.own.watermark.seq == 1 })
            #expect(refusal == .seqBeyondLastMessage(last: 1), "refused alone")
            let batches = commits.withLock { $0 }
            #expect(batches.reduce(0, +) == 8, "every read committed by a batch: \(batches)")
            #expect(batches.count < 8, "fewer transactions than reads: \(batches)")
            let events = try await store.webhookDeliveries(of: "whep_1", state: nil, before: nil, limit: 100)
            #expect(events.filter { $0.type == .messageRead }.count == 8, "one event per read")
            var notified: Set<String> = []
            for await change in changes {
                guard case .change(.read(let read)) = change.content else { continue }
                #expect(notified.insert(read.conversation.rawValue).inserted, "notified once")
                if notified.count == 8 { break }
            }
        }
    }

    /// Waits until `count` reads wait for a batch (a state, not a time).
    static func waitUntil(readsQueued count: Int, in store: PostgresStore) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while store.queuedDirectReads < count {
            guard ContinuousClock.now < deadline else { throw Timeout() }
            await Task.yield()
        }
    }

    @Test("a batch that fails writes nothing, and each of its operations is then written once on its own path")
    func failedBatches() async throws {
        try await Self.withObservedStore(events: [.messageCreated, .messageDelivered, .messageRead]) { store, url, changes in
            let conversations = try await Self.conversations(3, in: store)
            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { session in
                // The first write of each kind fails, once: a sequence's next value is not rolled back with the batch.
                try await session.execute(
                    """
                    CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN IF nextval(TG_ARGV[0]) = 1 THEN RAISE EXCEPTION 'failing once'; END IF; RETURN NEW; END $$
                    """
                )
                for (name, table, condition) in [
                    ("message_once", "message", "NEW.body = 'fail'"),
                    ("delivery_once", "receipt", "NEW.account = 'b1'"),
                    ("read_once", "receipt", "NEW.account = 'b2'"),
                ] {
                    try await session.execute("CREATE SEQUENCE \(name)")
                    try await session.execute(
                        """
                        CREATE TRIGGER \(name) AFTER INSERT OR UPDATE ON \(table) FOR EACH ROW WHEN (\(condition))
                        EXECUTE FUNCTION fail_once('\(name)')
                        """
                    )
                }
            }
            let appended = try await store.append(Self.draft("fail", in: conversations[0], from: "a0", body: "fail"))
            #expect(!appended.isDuplicate && appended.message.seq == 2)
            let delivered = try await store.advanceDelivered("b1", in: conversations[1], to: 1, at: 5)
            #expect(delivered.advanced && delivered.watermark.seq == 1)
            let read = try await store.markRead(
                ResolvedRead(reader: "b2", conversation: conversations[2], target: .upTo(1), isShared: true, time: 5)
            )
            #expect(read.ownChanged && read.own.watermark.seq == 1)
            #expect(try await store.messages(in: conversations[0], after: .zero, limit: 10).map(\.id) == ["first-0", "fail"])
            let events = try await store.webhookDeliveries(of: "whep_1", state: nil, before: nil, limit: 100)
            #expect(events.filter { $0.type == .messageCreated }.count == 3 + 1, "the first messages, and one for \"fail\"")
            #expect(events.filter { $0.type == .messageDelivered }.count == 1)
            #expect(events.filter { $0.type == .messageRead }.count == 1)
            // Each told the other nodes once: every notification up to a later message's.
            _ = try await store.append(Self.draft("last", in: conversations[0], from: "a0", body: "last"))
            var told: [String] = []
            listening: for await change in changes {
                switch change.content {
                case .change(.appended(let entry, _, _)):
                    told.append(entry.id.rawValue)
                    if entry.id == "last" { break listening }
                case .change(.delivered(_, let account, _, _)): told.append("delivered \(account)")
                case .change(.read(let read)): told.append("read \(read.reader)")
                default: break
                }
            }
            #expect(told.filter { !$0.hasPrefix("first-") } == ["fail", "delivered b1", "read b2", "last"])
        }
    }

    /// Waits until `count` deliveries wait for a batch (a state, not a time).
    static func waitUntil(deliveriesQueued count: Int, in store: PostgresStore) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while store.queuedDirectDeliveries < count {
            guard ContinuousClock.now < deadline else { throw Timeout() }
            await Task.yield()
        }
    }

    @Test("a send into a conversation another transaction holds waits on its own: the others are written meanwhile, and a retry is answered as the attempt that held it")
    func heldConversation() async throws {
        try await StorageBackend.withPostgresStore { (store: PostgresStore, url: String) in
            let conversations = try await Self.conversations(2, in: store)
            let (retried, other) = (conversations[0], conversations[1])
            try await PostgresTestDatabase.withSession(toDatabaseAt: url) { first in
                // The first attempt of a0's "r" is written and not yet committed (by another node, say): it holds the
                // conversation's row.
                try await first.execute("BEGIN")
                try await first.execute("UPDATE conversation SET last_seq = last_seq + 1 WHERE id = '\(retried.rawValue)'")
                try await first.execute(
                    """
                    INSERT INTO message (conversation_id, seq, id, sender, client_id, time, body)
                    VALUES ('\(retried.rawValue)', 2, 'first-attempt', 'a0', 'r', 1000, 'retry')
                    """
                )
                async let retry = store.append(
                    MessageDraft(id: "second-attempt", conversation: retried, clientID: "r", sender: "a0", time: 1_000, body: "retry")
                )
                // The retry waits for the row (a state: a session waiting for a lock); meanwhile another conversation's
                // sends are written.
                try await Self.waitUntil(
                    in: first,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                    is: 1
                )
                for index in 0..<3 {
                    let sent = try await store.append(Self.draft("other-\(index)", in: other, from: "b1", body: "other"))
                    #expect(!sent.isDuplicate && sent.message.seq == Seq(Int64(index + 2)))
                }
                try await first.execute("COMMIT")
                let answer = try await retry
                #expect(answer.isDuplicate && answer.message.id == "first-attempt" && answer.message.seq == 2)
            }
            #expect(try await store.messages(in: retried, after: .zero, limit: 10).map(\.id) == ["first-0", "first-attempt"])
            #expect(try await store.messages(in: other, after: .zero, limit: 10).map(\.seq.rawValue) == [1, 2, 3, 4])
        }
    }

    /// Waits until `query` counts `count` (a state, not a time).
    static func waitUntil(in session: PostgresSession, _ query: String, is count: Int64) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await session.integer(query) != count {
            guard ContinuousClock.now < deadline else { throw Timeout() }
            await Task.yield()
        }
    }
}
