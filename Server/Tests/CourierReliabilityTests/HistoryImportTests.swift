// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// History import as a team moving in runs it (docs/import.md): `courier-server import FILE` killed with
/// SIGKILL twice and run again, against the source file, an import that was never interrupted, and a webhook
/// receiver that must hear nothing of the history.
// One test at a time: each runs several courier-server processes, and the suite shares two cores with every other.
@Suite("History import", .serialized, .timeLimit(.minutes(6)))
struct HistoryImportTests {
    static let eventTypes = [
        "message.created", "message.delivered", "message.read", "message.recalled", "group.changed",
        "readReceipts.requested", "account.updated", "message.undelivered",
    ]

    @Test("20,000 messages in 200 conversations, killed twice and resumed: the source's history, unread counts and read states; no webhook")
    func killedTwiceAndResumed() async throws {
        let root = NSTemporaryDirectory() + "courier-import-" + UUID().uuidString
        let (resumed, reference) = (root + "/resumed", root + "/reference")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let source = HistorySource.generate()
        let file = root + "/history.jsonl"
        try Data(source.lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))

        // An endpoint that wants every event exists before the import: the history would reach it if it fired any.
        // The receiver listens on 127.0.0.1.
        let launch = ServerProcess.Launch(
            binary: Binaries.courierServer,
            arguments: ["--webhook-allow-private", "true"],
            folder: resumed
        )
        let before = try ServerProcess(launch, secret: Binaries.secret)
        let events = Self.eventTypes.map { "\"\($0)\"" }.joined(separator: ",")
        let port = try await freePort()
        let (created, body) = try await before.rest(
            "POST",
            "/v1/webhooks",
            json: Data(#"{"url":"http://127.0.0.1:\#(port)/hooks","events":[\#(events)]}"#.utf8)
        )
        #expect(created == 201)
        struct Endpoint: Decodable { let id: String; let secret: String }
        let endpoint = try JSONDecoder().decode(Endpoint.self, from: body)
        #expect(before.stop() == 0)

        // Killed once its progress says a batch is in (the next is being written), then further on, then run through.
        // The second run starts from the first line again only if the first one recorded no progress.
        let first = try Self.importKilled(file, into: resumed, afterLines: 1)
        let second = try Self.importKilled(file, into: resumed, afterLines: 12_000)
        #expect(first.status == 137 && second.status == 137, "both runs were killed, not finished")
        #expect(first.lines > 0 && second.lines >= 12_000, "killed after \(first.lines), then \(second.lines) lines")
        let last = try Self.importToEnd(file, into: resumed)
        #expect(last.status == 0, "\(last.output)")
        let summary = try JSONDecoder().decode(Summary.self, from: Data(last.output.split(separator: "\n").last.map(String.init)?.utf8 ?? "".utf8))
        #expect(summary.lines == source.lines.count && summary.skippedCount == 0, "\(last.output)")
        #expect(summary.resumedAfter >= second.lines, "the third run continued where the second got to: \(last.output)")
        let clean = try Self.importToEnd(file, into: reference)
        #expect(clean.status == 0, "\(clean.output)")

        let receiver = try await WebhookReceiver(port: port, path: "/hooks", secrets: [endpoint.secret])
        defer { receiver.stop() }
        var again = launch
        again.port = 0
        let server = try ServerProcess(again, secret: Binaries.secret)
        defer { _ = server.stop() }
        let referenceServer = try ServerProcess(.init(binary: Binaries.courierServer, folder: reference), secret: Binaries.secret)
        defer { _ = referenceServer.stop() }

        // The source, byte for byte: each conversation's messages in order, with their ids, senders, times, types,
        // bodies and ext; a recalled one erased.
        for conversation in source.conversations {
            let history = try await Self.history(server, conversation.id, as: conversation.viewer)
            let messages = history.filter { $0.group == nil && $0.recall == nil }
            #expect(messages.map(\.id) == conversation.messages.map(\.id), "\(conversation.id)")
            for (stored, expected) in zip(messages, conversation.messages) {
                let recalled = conversation.recalled.contains(expected.id)
                #expect(stored.sender == expected.from && stored.time == expected.time && stored.type == expected.type)
                #expect(stored.body == (recalled ? "" : expected.body) && stored.recalled == (recalled ? true : nil))
                #expect(stored.ext == (recalled ? nil : expected.ext), "\(stored.id)")
            }
            #expect(Set(history.compactMap(\.recall?.messageId)) == conversation.recalled)
            #expect(zip(history, history.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 }, "\(conversation.id): no gap")
            // An uninterrupted import of the same file holds the same bytes.
            let page = "/v1/conversations/\(conversation.id)/messages?account=\(conversation.viewer)&limit=1000"
            let (resumedPage, referencePage) = (try await server.rest("GET", page), try await referenceServer.rest("GET", page))
            #expect(resumedPage.status == 200 && resumedPage.body == referencePage.body, "\(conversation.id)")
        }

        // Unread counts: a direct conversation's as the source's read positions give them; every account's the same
        // as the uninterrupted import's; direct read states the same.
        for account in source.accounts {
            let unread = try await Self.unread(server, account)
            #expect(unread == (try await Self.unread(referenceServer, account)), "\(account)")
            for (conversation, count) in source.directUnread(of: account) {
                #expect((unread[conversation] ?? 0) == count, "\(account) in \(conversation)")
            }
        }
        for conversation in source.conversations where conversation.id.hasPrefix("d:") {
            let path = "/v1/conversations/\(conversation.id)/receipts"
            let (resumedState, referenceState) = (try await server.rest("GET", path), try await referenceServer.rest("GET", path))
            #expect(resumedState.status == 200 && resumedState.body == referenceState.body, "\(conversation.id)")
        }

        // No webhook: a live message after the import is the first and only delivery, in a conversation that has
        // imported history, and the endpoint's deliveries list nothing else.
        let direct = source.conversations[0]
        let live = #"{"from":"\#(direct.viewer)","body":"live","clientId":"live-1"}"#
        let (sent, sentBody) = try await server.rest("POST", "/v1/conversations/\(direct.id)/messages", json: Data(live.utf8))
        #expect(sent == 200, "\(String(decoding: sentBody, as: UTF8.self))")
        struct Ack: Decodable { let message: WireMessage }
        let liveID = try JSONDecoder().decode(Ack.self, from: sentBody).message.id
        let received = try #require(await receiver.next())
        #expect(received.verified && received.type == "message.created" && received.payload?.data.message?.id == liveID)
        let (listed, list) = try await server.rest("GET", "/v1/webhooks/\(endpoint.id)/deliveries?limit=100")
        struct Deliveries: Decodable { struct Delivery: Decodable { let type: String }; let deliveries: [Delivery] }
        let deliveries = try JSONDecoder().decode(Deliveries.self, from: list).deliveries
        #expect(listed == 200 && Set(deliveries.map(\.type)).isSubset(of: ["message.created", "message.undelivered"]))
        #expect(deliveries.count <= 2, "\(deliveries.map(\.type))")
    }

    @Test("a line that is not a record stops the import there; once fixed, the import continues after the lines it applied")
    func invalidLine() async throws {
        let root = NSTemporaryDirectory() + "courier-import-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let file = root + "/history.jsonl"
        var lines = [
            #"{"kind":"message","id":"m1","from":"alice","to":"bob","time":1000,"body":"one"}"#,
            #"{"kind":"group","id":"team-1","group":"team","action":"created","by":"alice","accounts":["bob"],"time":1500}"#,
            // dave is not a member yet: skipped.
            #"{"kind":"message","id":"m2","from":"dave","group":"team","time":2000,"body":"too early"}"#,
            #"{"kind":"group","id":"team-2","group":"team","action":"added","by":"alice","accounts":["dave"],"time":2500}"#,
            #"{"kind":"message","id":"m3","from":"alice","to":"bob","time":3000}"#,
            #"{"kind":"message","id":"m4","from":"alice","to":"bob","time":4000,"body":"four"}"#,
        ]
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        let run = try Self.importToEnd(file, into: root + "/data")
        #expect(run.status == 65)
        #expect(run.output.contains("line 5: import.invalidRecord: a message needs body"), "\(run.output)")
        #expect(run.output.contains(#""skippedCount":1"#), "\(run.output)")

        // Fixed, the same file continues after line 4: dave's early message stays skipped although dave is a member
        // by now (judged again, it would be stored after his joining).
        lines[4] = #"{"kind":"message","id":"m3","from":"alice","to":"bob","time":3000,"body":"three"}"#
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        let again = try Self.importToEnd(file, into: root + "/data")
        #expect(again.status == 0 && again.output.contains("continuing after line 4"), "\(again.output)")
        let summary = try JSONDecoder().decode(Summary.self, from: Data((again.output.split(separator: "\n").last ?? "").utf8))
        #expect(summary.resumedAfter == 4 && summary.messages == 2 && summary.skippedCount == 0, "\(again.output)")
        let server = try ServerProcess(.init(binary: Binaries.courierServer, folder: root + "/data"), secret: Binaries.secret)
        defer { _ = server.stop() }
        #expect(try await Self.history(server, "d:alice:bob", as: "alice").map(\.id) == ["m1", "m3", "m4"])
        #expect(try await Self.history(server, "g:team", as: "alice").map(\.id) == ["team-1", "team-2"])
    }

    @Test(
        "a vendor's sample export converts to the expected lines, which import with nothing skipped and read back as written",
        arguments: ["nim", "agora", "rongcloud"]
    )
    func vendorSample(vendor: String) async throws {
        let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../scripts/import").standardizedFileURL.path
        let sample = try #require(
            try FileManager.default.contentsOfDirectory(atPath: scripts + "/samples").first { $0.hasPrefix("\(vendor)-export") }
        )
        let converter = try ChildProcess(
            "/usr/bin/env", ["python3", "\(scripts)/\(vendor).py", "\(scripts)/samples/\(sample)"], captureOutput: true
        )
        let converted = converter.readToEnd()
        #expect(converter.wait() == 0)
        let expectedFile = "\(scripts)/samples/\(vendor).expected.jsonl"
        let expected = try String(contentsOfFile: expectedFile, encoding: .utf8)
        #expect(converted == expected, "the converter's output differs from \(vendor).expected.jsonl")

        let root = NSTemporaryDirectory() + "courier-import-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: root) }
        let run = try Self.importToEnd(expectedFile, into: root)
        #expect(run.status == 0, "\(run.output)")
        let summary = try JSONDecoder().decode(Summary.self, from: Data((run.output.split(separator: "\n").last ?? "").utf8))
        #expect(summary.skippedCount == 0, "\(run.output)")

        // Every message line is in its conversation's history, in the file's order, as written; recalled ones erased.
        var conversations: [String: (viewer: String, messages: [[String: Any]])] = [:]
        var order: [String] = []
        var recalled: Set<String> = []
        for line in expected.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            switch object["kind"] as? String {
            case "group" where object["action"] as? String == "created":
                let id = "g:\(object["group"] as! String)"
                conversations[id] = (object["by"] as! String, [])
                order.append(id)
            case "message":
                let from = object["from"] as! String
                let id = (object["group"] as? String).map { "g:\($0)" } ?? ConversationID.direct(
                    AccountID(rawValue: from), AccountID(rawValue: object["to"] as! String)
                ).rawValue
                if conversations[id] == nil {
                    conversations[id] = (from, [])
                    order.append(id)
                }
                conversations[id]!.messages.append(object)
            case "recall": recalled.insert(object["message"] as! String)
            default: break
            }
        }
        let server = try ServerProcess(.init(binary: Binaries.courierServer, folder: root), secret: Binaries.secret)
        defer { _ = server.stop() }
        for id in order {
            let (viewer, messages) = conversations[id]!
            let stored = try await Self.history(server, id, as: viewer).filter { $0.group == nil && $0.recall == nil }
            #expect(stored.map(\.id) == messages.map { $0["id"] as! String }, "\(vendor) \(id)")
            for (entry, line) in zip(stored, messages) {
                let erased = recalled.contains(entry.id)
                #expect(entry.sender == line["from"] as? String && entry.time == (line["time"] as? NSNumber)?.int64Value)
                #expect(entry.type == line["type"] as? String && entry.recalled == (erased ? true : nil))
                #expect(entry.body == (erased ? "" : line["body"] as? String), "\(vendor) \(entry.id)")
                #expect(entry.ext == (erased ? nil : line["ext"] as? [String: String]), "\(vendor) \(entry.id)")
            }
        }
    }

    // MARK: Helpers

    struct Summary: Decodable {
        let lines: Int
        let messages: Int
        let duplicates: Int
        let resumedAfter: Int
        let skippedCount: Int
    }

    struct Entry: Decodable {
        struct Recall: Decodable { let messageId: String }
        let id: String
        let seq: Int64
        let sender: String
        let time: Int64
        let type: String?
        let body: String
        let ext: [String: String]?
        let recalled: Bool?
        let recall: Recall?
        let group: [String: AnyCodable]?
    }

    /// Any JSON value, ignored.
    struct AnyCodable: Decodable {
        init(from decoder: any Decoder) throws {}
    }

    /// Runs `courier-server import` until its progress passes `afterLines`, then kills it with SIGKILL: the lines it
    /// had reported, and its exit status (137 when the kill ended it).
    static func importKilled(_ file: String, into folder: String, afterLines: Int) throws -> (lines: Int, status: Int32) {
        let process = try ChildProcess(
            "/bin/sh",
            ["-c", "exec \"$0\" import \"$1\" --data-dir \"$2\" --progress-lines 2000 2>&1", Binaries.courierServer, file, folder],
            captureOutput: true
        )
        let line = process.readLine { line in
            guard let count = Int(line.split(separator: " ").first ?? "") else { return false }
            return count >= afterLines
        }
        process.signal(SIGKILL)
        return (Int(line?.split(separator: " ").first ?? "") ?? 0, process.wait())
    }

    /// Runs `courier-server import` to its end: its exit status and what it printed.
    static func importToEnd(_ file: String, into folder: String) throws -> (status: Int32, output: String) {
        let process = try ChildProcess(
            "/bin/sh",
            ["-c", "exec \"$0\" import \"$1\" --data-dir \"$2\" 2>&1", Binaries.courierServer, file, folder],
            captureOutput: true
        )
        let output = process.readToEnd()
        return (process.wait(), output)
    }

    static func history(_ server: ServerProcess, _ conversation: String, as account: String) async throws -> [Entry] {
        let (status, body) = try await server.rest("GET", "/v1/conversations/\(conversation)/messages?account=\(account)&limit=1000")
        guard status == 200 else { throw HarnessError.refused("history of \(conversation): \(status)") }
        struct Page: Decodable { let messages: [Entry] }
        return try JSONDecoder().decode(Page.self, from: body).messages
    }

    static func unread(_ server: ServerProcess, _ account: String) async throws -> [String: Int] {
        let (status, body) = try await server.rest("GET", "/v1/accounts/\(account)/unread")
        guard status == 200 else { throw HarnessError.refused("unread of \(account): \(status)") }
        struct Unread: Decodable { let conversations: [String: Int] }
        return try JSONDecoder().decode(Unread.self, from: body).conversations
    }
}
