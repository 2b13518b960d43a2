// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Imported lines whose ids collide, and recalls of those ids (docs/import.md): an id is the entry's stored under
/// it — the first line that used it —, a later line with it is skipped, and a recall is judged against the stored
/// entry as a live recall is judged against the message it names (its conversation, its sender, who may recall
/// whose), never against the line that was skipped.
// One test at a time: each runs courier-server processes, and the suite shares two cores with every other.
@Suite("History import: reused ids", .serialized, .timeLimit(.minutes(6)))
struct HistoryImportCollisionTests {
    struct Skipped: Decodable, Hashable {
        let line: Int
        let code: String
    }

    struct Summary: Decodable {
        let messages: Int
        let recalls: Int
        let reads: Int
        let duplicates: Int
        let skippedCount: Int
        let skipped: [Skipped]
    }

    struct Entry: Decodable {
        struct Recall: Decodable, Hashable {
            let messageId: String
            let sender: String
            let recalledBy: String
        }
        let id: String
        let sender: String
        let body: String
        let recalled: Bool?
        let recall: Recall?
        let group: [String: HistoryImportTests.AnyCodable]?
    }

    /// `alice`'s message `id` to `bob`, `bob`'s message with the same id (skipped: `message.idInUse`), then `bob`'s
    /// recall of that id.
    static func reused(_ alice: String, _ bob: String, id: String) -> [String] {
        let time: Int64 = 1_577_838_000_000
        return [
            #"{"kind":"message","id":"\#(id)","from":"\#(alice)","to":"\#(bob)","time":\#(time),"body":"\#(alice)'s"}"#,
            #"{"kind":"message","id":"\#(id)","from":"\#(bob)","to":"\#(alice)","time":\#(time + 1000),"body":"\#(bob)'s"}"#,
            #"{"kind":"recall","id":"recall-\#(id)","message":"\#(id)","by":"\#(bob)","time":\#(time + 2000)}"#,
        ]
    }

    @Test("bob's recall of an id his skipped line reused is judged against alice's message stored under it: refused, and her message stays")
    func recallOfAReusedID() async throws {
        let root = NSTemporaryDirectory() + "courier-import-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Only the sender recalls a message in a direct conversation: the code a live recall of it by bob gets.
        let refused = [Skipped(line: 2, code: "message.idInUse"), Skipped(line: 3, code: "recall.notPermitted")]

        // courier-server import: the three lines in one file.
        let file = root + "/history.jsonl"
        let text = Self.reused("alice", "bob", id: "sx-1").joined(separator: "\n")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let run = try HistoryImportTests.importToEnd(file, into: root + "/data")
        #expect(run.status == 0, "\(run.output)")
        let last = run.output.split(separator: "\n").last ?? ""
        let cli = try JSONDecoder().decode(Summary.self, from: Data(last.utf8))
        #expect(cli.messages == 1 && cli.recalls == 0 && cli.skipped == refused, "\(run.output)")

        let launch = ServerProcess.Launch(binary: Binaries.courierServer, folder: root + "/data")
        let server = try ServerProcess(launch, secret: Binaries.secret)
        defer { _ = server.stop() }
        try await Self.expectIntact(server, sender: "alice", peer: "bob", id: "sx-1")

        // POST /v1/import: the three lines in one chunk.
        let chunk = try await Self.post(server, Self.reused("carol", "dave", id: "sx-2"))
        #expect(chunk.messages == 1 && chunk.recalls == 0 && chunk.skipped == refused, "\(chunk)")
        try await Self.expectIntact(server, sender: "carol", peer: "dave", id: "sx-2")

        // The message in one chunk, the reused id and the recall in the next: that import knows nothing of the first,
        // and the only line of its own with the id is the one it skips.
        let lines = Self.reused("erin", "frank", id: "sx-3")
        let first = try await Self.post(server, [lines[0]])
        #expect(first.messages == 1 && first.skippedCount == 0, "\(first)")
        let second = try await Self.post(server, Array(lines[1...]))
        #expect(second.messages == 0 && second.recalls == 0, "\(second)")
        let refusedLater = [Skipped(line: 1, code: "message.idInUse"), Skipped(line: 2, code: "recall.notPermitted")]
        #expect(second.skipped == refusedLater, "\(second)")
        try await Self.expectIntact(server, sender: "erin", peer: "frank", id: "sx-3")

        // Her own recall of it is allowed; its notice names her as the sender and as who recalled it.
        let own = #"{"kind":"recall","id":"recall-sx-1-alice","message":"sx-1","by":"alice","time":1577838003000}"#
        let recalled = try await Self.post(server, [own])
        #expect(recalled.recalls == 1 && recalled.skippedCount == 0, "\(recalled)")
        let history = try await Self.history(server, ConversationID.direct("alice", "bob").rawValue, as: "bob")
        #expect(history.map(\.id) == ["sx-1", "recall-sx-1-alice"])
        #expect(history.first?.body == "" && history.first?.recalled == true && history.first?.sender == "alice")
        #expect(history.last?.recall == Entry.Recall(messageId: "sx-1", sender: "alice", recalledBy: "alice"))
    }

    @Test("random lines with reused ids, recalls by anyone and reads, through POST /v1/import in one chunk or two: each id is its first line's message, erased only by a recall its recaller may make")
    func reusedIDsAgainstAModel() async throws {
        let seed: UInt64 = 0x4905
        let server = try ServerProcess(.init(binary: Binaries.courierServer), secret: Binaries.secret)
        defer { _ = server.stop() }
        for number in 0..<20 {
            let program = CollisionProgram(number: number, seed: seed &+ UInt64(number))
            let context = "seed \(seed) + \(number), the second chunk from line \(program.split + 1):\n"
                + program.lines.enumerated().map { "\($0.offset + 1) \($0.element)" }.joined(separator: "\n")
            var summaries: [Summary] = []
            for chunk in program.chunks { summaries.append(try await Self.post(server, chunk)) }

            // What each line did: a chunk's lines are numbered from its first.
            var skipped: [Skipped] = []
            for (index, summary) in summaries.enumerated() {
                let offset = index == 0 ? 0 : program.split
                skipped += summary.skipped.map { Skipped(line: $0.line + offset, code: $0.code) }
            }
            skipped.sort { $0.line < $1.line }
            #expect(skipped == program.skipped, "\(context)")
            #expect(summaries.reduce(0) { $0 + $1.messages } == program.messages, "\(context)")
            #expect(summaries.reduce(0) { $0 + $1.recalls } == program.recalls, "\(context)")
            #expect(summaries.reduce(0) { $0 + $1.reads } == program.reads, "\(context)")
            #expect(summaries.reduce(0) { $0 + $1.duplicates } == program.duplicates, "\(context)")

            // What is stored: each conversation's messages in the file's order, as their first lines sent them, erased
            // when recalled; a notice for each recall that was allowed, naming the message's sender and the recaller.
            for (conversation, viewer) in program.conversations {
                let entries = try await Self.history(server, conversation, as: viewer)
                let stored = entries.filter { $0.recall == nil && $0.group == nil }
                #expect(stored.map(\.id) == program.order[conversation, default: []], "\(conversation)\n\(context)")
                for entry in stored {
                    guard let owner = program.owners[entry.id] else { continue }
                    let place = "\(entry.id) in \(conversation)\n\(context)"
                    #expect(entry.sender == owner.sender, "\(place)")
                    #expect(entry.body == (owner.recalled ? "" : owner.body), "\(place)")
                    #expect(entry.recalled == (owner.recalled ? true : nil), "\(place)")
                }
                let notices = entries.compactMap(\.recall)
                let expected = program.notices[conversation, default: []]
                #expect(notices.count == expected.count && Set(notices) == Set(expected), "\(conversation)\n\(context)")
            }
        }
    }

    // MARK: Helpers

    /// `sender`'s message `id` to `peer` is the conversation's only entry, as sent: nothing of the skipped line, no
    /// recall notice.
    static func expectIntact(_ server: ServerProcess, sender: String, peer: String, id: String) async throws {
        let conversation = ConversationID.direct(AccountID(rawValue: sender), AccountID(rawValue: peer)).rawValue
        let entries = try await Self.history(server, conversation, as: peer)
        #expect(entries.map(\.id) == [id], "\(conversation)")
        let message = try #require(entries.first)
        #expect(message.sender == sender && message.body == "\(sender)'s", "\(conversation)")
        #expect(message.recalled == nil && message.recall == nil, "\(conversation)")
    }

    /// `POST /v1/import` of `lines` as one chunk: its summary.
    static func post(_ server: ServerProcess, _ lines: [String]) async throws -> Summary {
        var request = URLRequest(url: URL(string: server.httpURL + "/v1/import")!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(server.secret)", forHTTPHeaderField: "Authorization")
        request.setValue("application/x-ndjson", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(lines.joined(separator: "\n").utf8)
        let (body, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else {
            throw HarnessError.refused("POST /v1/import answered \(status): \(String(decoding: body, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Summary.self, from: body)
    }

    /// A conversation's entries as `account` sees them; none for a conversation that has none.
    static func history(_ server: ServerProcess, _ conversation: String, as account: String) async throws -> [Entry] {
        let (status, body) = try await server.rest(
            "GET",
            "/v1/conversations/\(conversation)/messages?account=\(account)&limit=1000"
        )
        if status == 404 { return [] }
        guard status == 200 else {
            throw HarnessError.refused("history of \(conversation): \(status) \(String(decoding: body, as: UTF8.self))")
        }
        struct Page: Decodable { let messages: [Entry] }
        return try JSONDecoder().decode(Page.self, from: body).messages
    }
}

/// One program of the model test, its accounts and ids prefixed with its number: `a` owns a group whose admin is `b`
/// and member `c`; `d` is in no group. After the accounts and the group, 30 random lines: messages (direct, or to the
/// group from a member) whose ids come from a pool of four, so that they collide; recalls of those ids by any of the
/// four; reads of them. Membership stays as it is, so every message line but one reusing an id is stored.
///
/// The model, applied line by line: an id is its first message line's; a later message line with it is a duplicate
/// when it has the same sender (the same idempotency key), else skipped. A recall is judged against the id's message
/// by the live rules — in a direct conversation only its sender recalls it; in a group its sender, the owner anyone
/// else's, an admin a member's, an account outside the group nothing — and erases it the first time it is allowed (a
/// later allowed one is a duplicate). A read is of a message in its conversation, a group's by a member.
struct CollisionProgram {
    struct Owner {
        let sender: String
        let conversation: String
        let body: String
        var recalled = false
    }

    enum Role { case owner, admin, member }

    static let start: Int64 = 1_577_836_800_000

    let number: Int
    let accounts: [String]
    let group: String
    let roles: [String: Role]
    var lines: [String] = []
    /// The number of lines in the first chunk: all of them for a program sent in one.
    var split = 0
    /// The message stored under each id.
    var owners: [String: Owner] = [:]
    /// Each conversation's message ids, in order.
    var order: [String: [String]] = [:]
    /// Each conversation's recall notices.
    var notices: [String: [HistoryImportCollisionTests.Entry.Recall]] = [:]
    /// The skipped lines, in order.
    var skipped: [HistoryImportCollisionTests.Skipped] = []
    var messages = 0
    var recalls = 0
    var reads = 0
    var duplicates = 0

    init(number: Int, seed: UInt64) {
        var random = SplitMix64(seed: seed)
        self.number = number
        let (a, b, c, d) = ("p\(number)a", "p\(number)b", "p\(number)c", "p\(number)d")
        accounts = [a, b, c, d]
        group = "p\(number)team"
        roles = [a: .owner, b: .admin, c: .member]
        for account in accounts { line(["kind": "account", "id": account, "createdAt": Self.start]) }
        line([
            "kind": "group", "id": "p\(number)-g1", "group": group, "action": "created", "by": a, "accounts": [b, c],
            "time": Self.start,
        ])
        line([
            "kind": "group", "id": "p\(number)-g2", "group": group, "action": "roleChanged", "by": a, "accounts": [b],
            "role": "admin", "time": Self.start,
        ])
        let header = lines.count
        let ids = (0..<4).map { "p\(number)-x\($0)" }
        for _ in 0..<30 {
            let at = lines.count + 1
            let time = Self.start + Int64(at) * 1000
            let from = accounts[random.next(below: accounts.count)]
            let id = ids[random.next(below: ids.count)]
            let kind = random.next(below: 10)
            if kind < 5 {
                let body = "line \(at) from \(from)"
                var object: [String: Any] = ["kind": "message", "id": id, "from": from, "time": time, "body": body]
                let conversation = self.conversation(of: from, into: &object, random: &random, field: "to")
                line(object)
                message(from: from, in: conversation, id: id, body: body, line: at)
            } else if kind < 8 {
                line(["kind": "recall", "id": "p\(number)-r\(at)", "message": id, "by": from, "time": time])
                recall(id, by: from, line: at)
            } else {
                var object: [String: Any] = ["kind": "read", "account": from, "upTo": id, "time": time]
                let conversation = self.conversation(of: from, into: &object, random: &random, field: "with")
                line(object)
                read(by: from, in: conversation, upTo: id, line: at)
            }
        }
        split = header + random.next(below: lines.count - header + 1)
    }

    /// The chunks it is sent in.
    var chunks: [[String]] {
        split < lines.count ? [Array(lines[..<split]), Array(lines[split...])] : [lines]
    }

    /// Every conversation it can have and an account that sees all of it.
    var conversations: [(id: String, viewer: String)] {
        var conversations = [(id: "g:\(group)", viewer: accounts[0])]
        for (index, one) in accounts.enumerated() {
            for other in accounts[(index + 1)...] { conversations.append((id: Self.direct(one, other), viewer: one)) }
        }
        return conversations
    }

    static func direct(_ one: String, _ other: String) -> String {
        ConversationID.direct(AccountID(rawValue: one), AccountID(rawValue: other)).rawValue
    }

    /// Picks where a line of `account`'s goes — its group (a member's, one time in three) or a direct conversation
    /// with another account, named by `field` — and writes it into `object`.
    func conversation(
        of account: String,
        into object: inout [String: Any],
        random: inout SplitMix64,
        field: String
    ) -> String {
        if roles[account] != nil, random.next(below: 3) == 0 {
            object["group"] = group
            return "g:\(group)"
        }
        let others = accounts.filter { $0 != account }
        let peer = others[random.next(below: others.count)]
        object[field] = peer
        return Self.direct(account, peer)
    }

    mutating func message(from sender: String, in conversation: String, id: String, body: String, line: Int) {
        if let owner = owners[id] {
            if owner.sender == sender {
                duplicates += 1
            } else {
                skipped.append(.init(line: line, code: "message.idInUse"))
            }
            return
        }
        owners[id] = Owner(sender: sender, conversation: conversation, body: body)
        order[conversation, default: []].append(id)
        messages += 1
    }

    mutating func recall(_ id: String, by requester: String, line: Int) {
        guard var owner = owners[id] else {
            skipped.append(.init(line: line, code: "message.notFound"))
            return
        }
        if owner.conversation == "g:\(group)" {
            guard let role = roles[requester] else {
                skipped.append(.init(line: line, code: "conversation.notAMember"))
                return
            }
            let manages =
                switch (role, roles[owner.sender] ?? .member) {
                case (.owner, .admin), (.owner, .member), (.admin, .member): true
                default: false
                }
            guard requester == owner.sender || manages else {
                skipped.append(.init(line: line, code: "recall.notPermitted"))
                return
            }
        } else if requester != owner.sender {
            skipped.append(.init(line: line, code: "recall.notPermitted"))
            return
        }
        if owner.recalled {
            duplicates += 1
            return
        }
        owner.recalled = true
        owners[id] = owner
        let notice = HistoryImportCollisionTests.Entry.Recall(
            messageId: id,
            sender: owner.sender,
            recalledBy: requester
        )
        notices[owner.conversation, default: []].append(notice)
        recalls += 1
    }

    mutating func read(by reader: String, in conversation: String, upTo id: String, line: Int) {
        guard let owner = owners[id], owner.conversation == conversation else {
            skipped.append(.init(line: line, code: "message.notFound"))
            return
        }
        if conversation == "g:\(group)", roles[reader] == nil {
            skipped.append(.init(line: line, code: "conversation.notAMember"))
            return
        }
        reads += 1
    }

    mutating func line(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        lines.append(String(decoding: data, as: UTF8.self))
    }
}
