// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierTestSupport
import Foundation
import Testing

/// The `courier` command driven as a user would: separate processes against a real server, `--json` parsed.
@Suite("The courier command", .timeLimit(.minutes(6)))
struct CommandLineTests {
    /// `Server/.build/debug/courier`, built by `swift build --build-tests`.
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/courier")

    /// A started `courier` process with its output as lines. Started with `ChildProcess` (`posix_spawn`, reaped with
    /// `waitpid`), not Foundation's `Process`, which now and then missed a child's exit among the many processes a
    /// full run starts, and hung the test until its time limit.
    struct Run: Sendable {
        let process: ChildProcess
        let lines: AsyncStream<String>
        let errorFile: String

        func finish() async -> (status: Int32, stderr: String) {
            // `waitpid` blocks: on a thread of its own, off the concurrency pool.
            let status = await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: process.wait()) }.start()
            }
            let stderr = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(atPath: errorFile)
            return (status, stderr)
        }
    }

    static func start(_ arguments: [String]) throws -> Run {
        let errorFile = NSTemporaryDirectory() + "/courier-cli-\(UUID().uuidString).stderr"
        let process = try ChildProcess(binary.path, arguments, captureOutput: true, errorFile: errorFile)
        return Run(process: process, lines: process.lines(), errorFile: errorFile)
    }

    typealias Output = (status: Int32, json: [[String: Any]], stderr: String)

    /// Runs `courier` to the end; returns its exit status, JSON output lines and standard error.
    static func run(_ arguments: [String]) async throws -> Output {
        let started = try start(arguments)
        var lines: [String] = []
        for await line in started.lines { lines.append(line) }
        let (status, stderr) = await started.finish()
        let json = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return (status, json, stderr)
    }

    @Test("courier demo starts its own server, plays every step and exits 0")
    func demo() async throws {
        let (status, json, stderr) = try await Self.run(["demo", "--json"])
        #expect(status == 0, "\(stderr)")
        let steps = json.filter { $0["step"] != nil }
        #expect(steps.count == 10)
        #expect(steps.allSatisfy { $0["ok"] as? Bool == true })
        let titles = steps.compactMap { $0["title"] as? String }
        for expected in [
            "delivered", "three kinds of read ack", "2/3, then 3/3", "within the window", "outside the window",
            "admin recalls", "catches up", "edits a message and bob reacts",
        ] {
            #expect(titles.contains { $0.contains(expected) }, "no step about \(expected)")
        }
        #expect(json.last?["ok"] as? Bool == true && json.last?["steps"] as? Int == 10)
    }

    @Test("send, watch, read, unread, history and recall, with --json, and the documented exit codes")
    func scriptableCommands() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer { server in
            try await server.register("alice", "bob")
            try server.secret.value.write(toFile: folder.path + "/app-secret", atomically: true, encoding: .utf8)
            let common = ["--server", server.webSocketURL.absoluteString, "--data-dir", folder.path, "--json"]
            func courier(_ arguments: String..., as account: String) async throws -> Output {
                try await Self.run(arguments + ["--as", account] + common)
            }

            // alice watches on a device of her own (its own store) while bob reads what she sends from the shell:
            // her message arriving from the other device, then bob's delivery and read receipts.
            let watchStore = folder.path + "/watch-store"
            let watch = try Self.start(["watch", "--count", "3", "--store", watchStore, "--as", "alice"] + common)
            _ = try await watch.lines.first(timeout: .seconds(30)) { $0.contains("ready") ? $0 : nil }

            let sent = try await courier("send", "bob", "hello from the shell", as: "alice")
            #expect(sent.status == 0)
            let id = try #require(sent.json.first?["id"] as? String)
            #expect(sent.json.first?["body"] as? String == "hello from the shell")

            let unread = try await courier("unread", as: "bob")
            #expect(unread.json.last?["total"] as? Int == 1)
            let read = try await courier("read", "alice", "--message", id, as: "bob")
            #expect(read.status == 0 && read.json.first?["unreadCount"] as? Int == 0)

            let events = try await watch.lines.collect(3, timeout: .seconds(30)) { $0 }
            #expect(events.map { $0.contains("\"messageReceived\"") } == [true, false, false], "\(events)")
            #expect(events.count == 3 && events[1].contains("messageDelivered"), "\(events)")
            #expect(events.count == 3 && events[2].contains("messageRead") && events[2].contains(id), "\(events)")
            #expect(await watch.finish().status == 0)

            let history = try await courier("history", "bob", as: "alice")
            #expect(history.json.map { $0["id"] as? String } == [id])
            #expect(history.json.first?["status"] as? String == "read")

            // Refused: a stable code on standard error, exit 1. Usage errors: exit 64.
            let refused = try await courier("recall", "alice", id, as: "bob")
            #expect(refused.status == 1 && refused.stderr.contains("recall.notPermitted"))
            let usage = try await courier("read", "alice", as: "bob")
            #expect(usage.status == 64)
            let noSecret = try await Self.run(
                [
                    "unread", "--as", "bob", "--server", server.webSocketURL.absoluteString, "--data-dir",
                    folder.path + "/none",
                ]
            )
            #expect(noSecret.status == 64 && noSecret.stderr.contains("app-secret"))

            let recalled = try await courier("recall", "bob", id, "--postscript", "oops", as: "alice")
            #expect(recalled.status == 0 && recalled.json.first?["messageId"] as? String == id)
            let listed = try await courier("history", "alice", as: "bob").json
            #expect(listed.map { $0["status"] as? String } == ["recalled"] && listed.first?["body"] as? String == "")
        }
    }

    @Test("group create, add, role, remove and leave; a receipt-asking send; acks with content; counts and paged lists")
    func groupCommands() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer { server in
            try await server.register("alice", "bob", "carol", "dave")
            try server.secret.value.write(toFile: folder.path + "/app-secret", atomically: true, encoding: .utf8)
            let common = ["--server", server.webSocketURL.absoluteString, "--data-dir", folder.path, "--json"]
            func courier(_ arguments: String..., as account: String) async throws -> Output {
                try await Self.run(arguments + ["--as", account] + common)
            }

            let created = try await courier("group", "create", "team", "bob", "carol", as: "alice")
            #expect(created.status == 0 && created.json.first?["action"] as? String == "created")
            #expect(created.json.first?["accounts"] as? [String] == ["bob", "carol"])
            #expect(try await courier("group", "add", "team", "dave", as: "alice").status == 0)
            let role = try await courier("group", "role", "g:team", "admin", "bob", as: "alice")
            #expect(
                role.json.first?["action"] as? String == "roleChanged" && role.json.first?["role"] as? String == "admin"
            )
            let members = try await courier("group", "members", "team", "--limit", "2", as: "carol")
            #expect(members.json.compactMap { $0["account"] as? String } == ["alice", "bob"])
            #expect(members.json.last?["total"] as? Int == 4 && members.json.last?["nextCursor"] as? String == "bob")

            let sent = try await courier("send", "g:team", "ship it?", "--needs-read-receipt", as: "alice")
            let id = try #require(sent.json.first?["id"] as? String)
            #expect(try await courier("read", "g:team", "--message", id, "--content", "yes", as: "bob").status == 0)
            #expect(try await courier("read", "g:team", "--all", as: "carol").status == 0)

            let counts = try await courier("receipts", "team", id, as: "alice")
            #expect(counts.json.first?["readCount"] as? Int == 2 && counts.json.first?["unreadCount"] as? Int == 1)
            let firstPage = try await courier("receipts", "team", id, "--list", "read", "--limit", "1", as: "alice")
            #expect(firstPage.json.first?["account"] as? String == "bob")
            #expect(firstPage.json.first?["content"] as? String == "yes")
            let cursor = try #require(firstPage.json.last?["nextCursor"] as? String)
            let secondPage = try await courier(
                "receipts",
                "team",
                id,
                "--list",
                "read",
                "--limit",
                "1",
                "--cursor",
                cursor,
                as: "alice"
            )
            #expect(
                secondPage.json.first?["account"] as? String == "carol" && secondPage.json.last?["total"] as? Int == 2
            )
            let unread = try await courier("receipts", "team", id, "--list", "unread", as: "alice")
            #expect(unread.json.compactMap { $0["account"] as? String } == ["dave"])

            // Refusals keep their stable codes; membership changes take effect.
            let notPermitted = try await courier("group", "remove", "team", "alice", as: "bob")
            #expect(notPermitted.status == 1 && notPermitted.stderr.contains("group.notPermitted"))
            #expect(try await courier("group", "remove", "team", "dave", as: "bob").status == 0)
            #expect(try await courier("group", "leave", "team", as: "carol").status == 0)
            let later = try await courier("send", "g:team", "after carol left", as: "alice")
            let laterID = try #require(later.json.first?["id"] as? String)
            // carol keeps her local copy of what she saw, gets nothing new, and may no longer send.
            let kept = try await courier("history", "g:team", as: "carol")
            #expect(kept.status == 0 && kept.json.contains { $0["id"] as? String == id })
            #expect(!kept.json.contains { $0["id"] as? String == laterID })
            let gone = try await courier("send", "g:team", "hello?", as: "carol")
            #expect(gone.status == 1 && gone.stderr.contains("conversation.notAMember"))
            let ownerLeaves = try await courier("group", "leave", "team", as: "alice")
            #expect(ownerLeaves.status == 1 && ownerLeaves.stderr.contains("group.ownerCannotLeave"))
            #expect(try await courier("group", "role", "team", "owner", "bob", "carol", as: "alice").status == 64)
        }
    }
}
