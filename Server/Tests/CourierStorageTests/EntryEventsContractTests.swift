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

/// What an append tells others — its webhook events and, on PostgreSQL, its notification to the other nodes — names
/// the entry as stored, whichever way the store appended it. PostgreSQL writes a direct chat's message, its events
/// and its notification in one statement, their payloads written beforehand with seq 0 and completed by the
/// statement; a first message, an earlier time or a duplicate go another way. These cases cover each way, with bodies
/// that spell what the statement completes.
@Suite("Storage contract: what an entry tells others", .timeLimit(.minutes(5)))
struct EntryEventsContractTests {
    static let backends = StorageBackend.available
    static let conversation = ConversationID.direct("alice", "bob")

    /// Bodies that contain the placeholders' text, raw and quoted.
    static let bodies = [
        "first",
        #"","seq":0,"time":""#,
        #""seq":0"#,
        #",\"seq\":0,\"time\":"#,
        "\"seq\":0,\"time\":1} {\"seq\":0",
        "plain",
    ]

    /// The drafts: the first message creates the conversation; the fourth goes back in time (it takes the
    /// conversation's latest time); the last repeats the second's client id (a duplicate, which reports nothing).
    static func drafts() -> [MessageDraft] {
        var drafts = bodies.enumerated().map { index, body in
            MessageDraft(
                id: MessageID(rawValue: "m\(index)"),
                conversation: conversation,
                clientID: ClientMessageID(rawValue: "c\(index)"),
                sender: index.isMultiple(of: 2) ? "alice" : "bob",
                time: Timestamp(milliseconds: index == 3 ? 1_000 : Int64(2_000 + index)),
                body: body
            )
        }
        drafts.append(
            MessageDraft(
                id: MessageID(rawValue: "m-again"), conversation: conversation, clientID: ClientMessageID(rawValue: "c1"),
                sender: "bob", time: Timestamp(milliseconds: 9_000), body: "again"
            )
        )
        return drafts
    }

    struct Envelope: Decodable {
        struct Data: Decodable { let message: WireMessage }
        let data: Data
    }

    struct Undelivered: Decodable { let message: WireMessage }

    @Test("an entry's webhook events carry it as stored: its seq, its time, its text", arguments: backends)
    func webhookEvents(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account: AccountID in ["alice", "bob"] { try await store.registerAccount(account, at: 0) }
            try await store.createWebhookEndpoint(
                WebhookEndpoint(
                    id: "whep_1", url: "http://127.0.0.1:9/", events: [.messageCreated, .messageUndelivered],
                    secret: "whsec_x", createdAt: 0
                )
            )
            var stored: [WireMessage] = []
            for draft in Self.drafts() {
                let result = try await store.append(draft)
                // The append returns the change its transaction made, the entry as stored; a duplicate makes none.
                #expect(result.change == (result.isDuplicate ? nil : .appended(result.message, membershipSeq: nil, pushes: true)))
                if !result.isDuplicate { stored.append(result.message) }
            }
            #expect(stored.map(\.seq) == (1...Int64(Self.bodies.count)).map { Seq($0) })
            #expect(stored[3].time == stored[2].time, "an earlier time takes the conversation's latest")
            #expect(try await store.messages(in: Self.conversation, after: .zero, limit: 50) == stored)

            let deliveries = try await store.webhookDeliveries(of: "whep_1", state: nil, before: nil, limit: 100)
                .sorted { $0.seq < $1.seq }
            let created = try deliveries.filter { $0.type == .messageCreated }
                .map { try JSONDecoder().decode(Envelope.self, from: Data($0.payload.utf8)).data.message }
            #expect(created == stored)
            let undelivered = try deliveries.filter { $0.type == .messageUndelivered }
                .map { try JSONDecoder().decode(Undelivered.self, from: Data($0.payload.utf8)).message }
            #expect(undelivered == stored)
        }
    }

    @Test(
        "PostgreSQL: each append's notification to the other nodes names its seq",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL")
    )
    func notifications() async throws {
        try await PostgresTestDatabase.withDatabase { url in
            let logger = Logger(label: "courier.test", factory: { _ in SwiftLogNoOpLogHandler() })
            let store = try PostgresStore(url: url, nodeID: "writer", timeouts: .patient, logger: logger)
            let feed = try PostgresChangeFeed(url: url, nodeID: "observer", logger: logger)
            let (changes, change) = AsyncStream.makeStream(of: ChangeNotice.self)
            let (listening, listens) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                group.addTask {
                    try await feed.run(onChange: { change.yield($0) }, onResync: { listens.yield() })
                }
                defer { group.cancelAll() }
                try await store.migrate()
                var ready = listening.makeAsyncIterator()
                _ = await ready.next()  // the feed listens
                for account: AccountID in ["alice", "bob"] { try await store.registerAccount(account, at: 0) }
                var seqs: [Seq] = []
                for draft in Self.drafts() {
                    let result = try await store.append(draft)
                    if !result.isDuplicate { seqs.append(result.message.seq) }
                }
                var received: [Seq] = []
                for await change in changes {
                    guard case .change(.appended(let entry, _, _)) = change.content else { continue }
                    #expect(entry.conversation == Self.conversation && change.origin == "writer")
                    received.append(entry.seq)
                    if received.count == seqs.count { break }
                }
                #expect(received == seqs)
            }
        }
    }
}
