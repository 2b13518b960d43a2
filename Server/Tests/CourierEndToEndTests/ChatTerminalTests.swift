// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierServer
import CourierTestSupport
import Foundation
import Testing

/// `courier chat` in a real terminal: tmux runs it in a pane, the test types with `send-keys` and reads the screen
/// with `capture-pane` each time the pane's output changes (streamed through `pipe-pane`), so nothing sleeps.
@Suite("courier chat in a terminal", .timeLimit(.minutes(5)))
struct ChatTerminalTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("a message arrives, turns ✓ then ✓✓ when read, and disappears on recall; /quit leaves with status 0")
    func chat() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer { server in
            try await server.register("alice", "bob")
            try server.secret.value.write(toFile: folder.path + "/app-secret", atomically: true, encoding: .utf8)
            let bob = try await server.connectedClient("bob")
            let bobEvents = bob.events()
            let terminal = try Terminal(
                folder: folder.path,
                command: [
                    CommandLineTests.binary.path, "chat", "--as", "alice", "bob", "--server",
                    server.webSocketURL.absoluteString, "--data-dir", folder.path,
                ]
            )
            do {
                try await terminal.waitForScreen { $0.contains("Courier chat — alice with bob · connected") }

                let greeting = try await bob.send("hi alice", to: conversation).stored()
                try await terminal.waitForScreen { $0.contains("bob: hi alice") }
                // On screen counts as read: bob hears of it.
                _ = try await bobEvents.first {
                    $0.readUpdate.flatMap { $0.messageIDs.contains(greeting.id) ? true : nil }
                }

                try terminal.type("hello bob")
                let mine = try await bobEvents.first {
                    $0.receivedMessage.flatMap { $0.body == "hello bob" ? $0 : nil }
                }
                try await terminal.waitForScreen { Self.line(in: $0, containing: "alice: hello bob")?.hasSuffix("  ✓") }
                try await bob.markConversationRead(conversation)
                try await terminal.waitForScreen { Self.line(in: $0, containing: "alice: hello bob")?.hasSuffix("✓✓") }

                try terminal.type("/recall")
                try await terminal.waitForScreen { !$0.contains("hello bob") && $0.contains("You recalled a message") }
                _ = try await bobEvents.first { $0.recallNotice.flatMap { $0.messageID == mine.id ? true : nil } }
                try await bob.recall(greeting.id, in: conversation)
                try await terminal.waitForScreen { !$0.contains("hi alice") && $0.contains("bob recalled a message") }

                try terminal.type("/quit")
                #expect(try await terminal.exitStatus() == 0)
            } catch {
                Issue.record("Screen at failure:\n\((try? terminal.screen()) ?? "?")")
                terminal.close()
                throw error
            }
            terminal.close()
        }
    }

    static func line(in screen: String, containing text: String) -> String? {
        screen.split(separator: "\n").first { $0.contains(text) }.map {
            String($0).trimmingCharacters(in: .whitespaces)
        }
    }
}

/// A program running in a tmux pane of its own tmux server (a private socket, so the user's tmux is untouched).
final class Terminal: Sendable {
    private let socket = "courier-test-\(UUID().uuidString.prefix(8))"
    private let reader: FileHandle
    /// Signals that the pane printed something (coalesced).
    private let changes: AsyncStream<Void>

    init(folder: String, command: [String]) throws {
        let fifo = folder + "/pane-output"
        guard mkfifo(fifo, 0o600) == 0 else { throw TerminalError("mkfifo failed") }
        let quoted = command.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        // The shell prints the program's exit status when it ends; the pane stays open to show it.
        let shell = quoted + "; echo \"[exited with status $?]\"; exec cat"
        try Self.tmux(socket, "new-session", "-d", "-s", "main", "-x", "110", "-y", "30", shell)
        try Self.tmux(socket, "pipe-pane", "-t", "main", "cat > '\(fifo)'")
        // Opening blocks until `cat` has the FIFO open for writing.
        guard let reader = FileHandle(forReadingAtPath: fifo) else { throw TerminalError("cannot open \(fifo)") }
        self.reader = reader
        let (changes, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.changes = changes
        reader.readabilityHandler = { handle in
            if handle.availableData.isEmpty {
                handle.readabilityHandler = nil
                continuation.finish()
            } else {
                continuation.yield()
            }
        }
    }

    /// What the pane shows now.
    func screen() throws -> String { try Self.tmux(socket, "capture-pane", "-p", "-t", "main") }

    /// Types `text` and Enter.
    func type(_ text: String) throws {
        try Self.tmux(socket, "send-keys", "-t", "main", "-l", text)
        try Self.tmux(socket, "send-keys", "-t", "main", "Enter")
    }

    /// Waits until the screen satisfies `predicate`, checking now and after each change of the pane's output.
    @discardableResult
    func waitForScreen(
        timeout: Duration = .seconds(20),
        _ predicate: @escaping @Sendable (String) -> Bool?
    ) async throws -> String {
        try await withThrowingTaskGroup(of: String.self) { group in
            group.addTask {
                var screen = try self.screen()
                if predicate(screen) == true { return screen }
                for await _ in self.changes {
                    screen = try self.screen()
                    if predicate(screen) == true { return screen }
                }
                throw TerminalError("the pane closed; last screen:\n\(screen)")
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TerminalError("the screen did not change as expected within \(timeout)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Waits for the program to end and returns its exit status.
    func exitStatus() async throws -> Int32? {
        let screen = try await waitForScreen { $0.contains("[exited with status ") }
        let tail = screen.components(separatedBy: "[exited with status ").last ?? ""
        return Int32(tail.prefix { $0.isNumber })
    }

    func close() {
        _ = try? Self.tmux(socket, "kill-server")
        reader.readabilityHandler = nil
        try? reader.close()
    }

    /// Runs `tmux -L socket ARGUMENTS…` and returns its standard output. Spawned and reaped directly: the first
    /// command starts the tmux server, which inherits the command's descriptors, so output goes to a file (a pipe
    /// would never reach end of file).
    @discardableResult
    private static func tmux(_ socket: String, _ arguments: String...) throws -> String {
        let outputPath = NSTemporaryDirectory() + "courier-tmux-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else: the tmux server would keep the test process's descriptors open, among them the listening
        // sockets of other tests' servers, which could then not restart on their port.
        // (glibc ≥ 2.34 has `posix_spawn_file_actions_addclosefrom_np`; Swift's Glibc module does not export it.)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { throw TerminalError("this C library cannot close descriptors in a spawned process") }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        // The test process blocks most signals on its threads; tmux must not inherit that mask (its server would
        // never see SIGCHLD or SIGTERM and outlive the test).
        let argv = (["tmux", "-L", socket] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        guard ChildProcess.withDefaultSignals({ posix_spawnp(&pid, "tmux", &actions, $0, argv, environ) }) == 0 else {
            throw TerminalError("cannot start tmux")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else {
            throw TerminalError("tmux \(arguments.joined(separator: " ")) exited with status \(status)")
        }
        return String(decoding: FileManager.default.contents(atPath: outputPath) ?? Data(), as: UTF8.self)
    }
}

struct TerminalError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
