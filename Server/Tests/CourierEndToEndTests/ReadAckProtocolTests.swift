// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Testing

/// The `read` frame as a protocol client sees it: stale and repeated reads answer the current state and tell nobody;
/// bogus ones get a stable error and the connection stays up.
@Suite("Read acks on the wire", .timeLimit(.minutes(5)))
struct ReadAckProtocolTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("stale, repeated and bogus reads")
    func staleDuplicateAndBogus() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol")
            let alice = try await server.connectedClient("alice")
            let sent = [
                try await alice.send("1", to: conversation).stored(), try await alice.send("2", to: conversation).stored(),
                try await alice.send("3", to: conversation).stored(),
            ]
            let elsewhere = try await alice.send("other", to: .direct("alice", "carol")).stored()
            let aliceEvents = alice.events()
            try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                func read(_ id: RequestID, _ request: ReadRequest) async throws -> ServerFrame? {
                    try await bob.request(.read(id, request))
                }
                // A first read moves the watermark…
                guard case .ack(_, .read(let first)) = try await read("r1", .init(conversation: conversation, seq: 2))
                else { throw Unexpected() }
                #expect(first.watermark.seq == 2 && first.unreadCount == 1)
                // …a stale one, a repeat, and a message ack below the watermark change nothing.
                for (id, request) in [
                    ("r2", ReadRequest(conversation: conversation, seq: 1)),
                    ("r3", ReadRequest(conversation: conversation, seq: 2)),
                    ("r4", ReadRequest(conversation: conversation, messageIDs: [sent[0].id])),
                    ("r5", ReadRequest(conversation: conversation, time: sent[0].time)),
                ] as [(RequestID, ReadRequest)] {
                    guard case .ack(_, .read(let state)) = try await read(id, request) else { throw Unexpected() }
                    #expect(state == first)
                }
                // Bogus reads: each a stable error.
                let bogus: [(ReadRequest, ErrorCode)] = [
                    (.init(conversation: conversation, seq: 4), .receiptBeyondLastMessage),
                    (.init(conversation: conversation, messageIDs: [elsewhere.id]), .messageNotInConversation),
                    (.init(conversation: conversation, messageIDs: ["no-such-id"]), .messageNotFound),
                    (.init(conversation: conversation, messageIDs: []), .invalidArgument),
                    (
                        .init(conversation: conversation, messageIDs: Array(repeating: sent[2].id, count: 101)),
                        .invalidArgument
                    ),
                    (.init(conversation: conversation), .invalidArgument),
                    (.init(conversation: conversation, seq: 3, all: true), .invalidArgument),
                    (.init(conversation: conversation, seq: -1), .invalidArgument),
                    (.init(conversation: .direct("alice", "carol"), all: true), .conversationNotAMember),
                    (.init(conversation: "g:nope", all: true), .groupNotFound),
                    (.init(conversation: "x:nope", all: true), .conversationInvalid),
                    (.init(conversation: .direct("bob", "carol"), all: true), .conversationNotFound),
                ]
                for (index, (request, code)) in bogus.enumerated() {
                    let frame = try await read(RequestID(rawValue: "bad\(index)"), request)
                    guard case .error(_, let error) = frame else {
                        Issue.record("accepted \(request): \(String(describing: frame))")
                        continue
                    }
                    #expect(error.code == code, "\(request)")
                }
                guard case .ack(_, .ping) = try await bob.request(.ping("alive")) else { throw Unexpected() }
                // Nothing moved: one more real read, and alice's first read event is that one.
                _ = try await read("r6", .init(conversation: conversation, all: true))
            }
            let update = try await aliceEvents.first { $0.readUpdate }
            #expect(update.watermark.seq == 2 && update.messageIDs == [sent[0].id, sent[1].id])
            let next = try await aliceEvents.first { $0.readUpdate }
            #expect(next.watermark.seq == 3 && next.messageIDs == [sent[2].id])
            #expect(try await server.store.readState(of: "bob", in: conversation).unreadCount == 0)
        }
    }

    @Test("unread and the last sync page answer the server's counts; a read ack of your own message is a no-op")
    func unreadRequest() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let alice = try await server.connectedClient("alice")
            try await alice.send("1", to: conversation).stored()
            let own = try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                guard
                    case .ack(_, .send(let ack)) = try await bob.request(
                        .send("s", SendRequest(conversation: conversation, clientID: "b1", body: "mine"))
                    )
                else { throw Unexpected() }
                guard
                    case .ack(_, .read(let state)) = try await bob.request(
                        .read("r", ReadRequest(conversation: conversation, messageIDs: [ack.message.id]))
                    )
                else { throw Unexpected() }
                #expect(state.watermark.seq == .zero && state.unreadCount == 1)
                guard case .ack(_, .unread(let unread)) = try await bob.request(.unread("u")) else {
                    throw Unexpected()
                }
                // sync: unread counts come with the page that completes it, the other state with the pages that carry
                // the conversation's messages.
                guard
                    case .ack(_, .sync(let first)) = try await bob.request(
                        .sync("s1", SyncRequest(cursors: [:], limit: 1))
                    ),
                    case .ack(_, .sync(let last)) = try await bob.request(
                        .sync("s2", SyncRequest(cursors: [conversation: 1], limit: 1))
                    )
                else { throw Unexpected() }
                #expect(first.hasMore && first.conversations.first?.unreadCount == nil)
                #expect(first.conversations.first?.lastSeq == 2)
                #expect(!last.hasMore && last.conversations.first?.unreadCount == 1)
                return unread
            }
            #expect(own == UnreadAck(conversations: [conversation: 1], total: 1))
        }
    }

    @Test("a sync of many pages carries each conversation's state with its messages, and every state on the last page")
    func syncPagesCarryStatesOnce() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol", "dave")
            let alice = try await server.connectedClient("alice")
            // Four of Bob's conversations: one long, two short, one quiet since Bob's device last saw it.
            for index in 1...5 { try await alice.send("a\(index)", to: conversation).stored() }
            let carol = try await server.connectedClient("carol")
            try await carol.send("c1", to: .direct("bob", "carol")).stored()
            let dave = try await server.connectedClient("dave")
            try await dave.send("d1", to: .direct("bob", "dave")).stored()
            _ = try await carol.createGroup("team", members: ["bob"])
            let all: Set<ConversationID> = [conversation, .direct("bob", "carol"), .direct("bob", "dave"), .group("team")]

            let pages = try await server.withRawConnection { bob in
                _ = try await bob.connect(as: "bob", server: server)
                var cursors: [ConversationID: Seq] = [.group("team"): 1]
                var pages: [SyncAck] = []
                repeat {
                    guard
                        case .ack(_, .sync(let page)) = try await bob.request(
                            .sync(RequestID(rawValue: "s\(pages.count)"), SyncRequest(cursors: cursors, limit: 3))
                        )
                    else { throw Unexpected() }
                    pages.append(page)
                    for message in page.messages { cursors[message.conversation] = message.seq }
                } while pages.last?.hasMore == true && pages.count < 10
                return pages
            }
            // Seven entries three at a time: three pages (by conversation id, then seq).
            #expect(pages.map { $0.messages.count } == [3, 3, 1])
            for page in pages.dropLast() {
                #expect(Set(page.conversations.map(\.id)) == Set(page.messages.map(\.conversation)))
                #expect(page.conversations.allSatisfy { $0.unreadCount == nil })
            }
            let last = try #require(pages.last)
            #expect(!last.hasMore && Set(last.conversations.map(\.id)) == all)
            #expect(last.conversations.allSatisfy { $0.unreadCount != nil })
            // 1 + 2 + 4 states in all (with their messages, and every one on the last page), not 4 per page.
            let sent = pages.flatMap { $0.conversations.map(\.id) }
            #expect(sent.count == 1 + 2 + all.count, "\(sent)")
        }
    }
}

struct Unexpected: Error {}
