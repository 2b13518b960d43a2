// Courier — Apache-2.0
#if canImport(Glibc)
public import Glibc
#endif
internal import Foundation

/// A child process started with `posix_spawn` and reaped with `waitpid`: no run loop, no signal handler, and no
/// descriptor of the parent (another test's listening socket, say) leaks into it. Foundation's `Process` missed a
/// child's exit now and then when many were started at once, which hung a test.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    /// The read end of the child's standard output, when captured.
    let output: Int32?

    /// Starts `executable` with `arguments`. Standard output goes to a pipe when `captureOutput`, else nowhere;
    /// standard error goes to `errorFile` (appended) or nowhere.
    public init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        captureOutput: Bool = false,
        errorFile: String? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipe: [Int32] = [-1, -1]
        if captureOutput {
            // Close-on-exec, so a child another thread spawns meanwhile does not inherit the write end and keep the
            // output open after this child has exited (`dup2` below clears the flag on the child's copy).
            guard let pipe2 = Self.pipe2, pipe2(&pipe, O_CLOEXEC) == 0 else { throw HarnessError.serverDidNotStart("pipe: \(errno)") }
            posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        if let errorFile {
            posix_spawn_file_actions_addopen(&actions, 2, errorFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        _ = Self.closeFrom?(&actions, 3)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        let envp = variables + [nil]
        defer { variables.forEach { free($0) } }
        var pid: pid_t = 0
        let status = Self.withDefaultSignals { posix_spawn(&pid, executable, &actions, $0, argv, envp) }
        if captureOutput { close(pipe[1]) }
        guard status == 0 else {
            if captureOutput { close(pipe[0]) }
            throw HarnessError.serverDidNotStart("posix_spawn \(executable): \(status)")
        }
        self.pid = pid
        self.output = captureOutput ? pipe[0] : nil
    }

    deinit { if let output { close(output) } }

    /// Spawn attributes under which a child starts with no signal blocked and every signal at its default: it
    /// inherits the spawning thread's mask otherwise, and the runtime's threads block some (nginx, which waits for
    /// SIGTERM with the mask it was given, then never ended; tmux's server never saw SIGCHLD).
    public static func withDefaultSignals<T>(_ body: (UnsafePointer<posix_spawnattr_t>) throws -> T) rethrows -> T {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return try withUnsafePointer(to: &attributes) { try body($0) }
    }

    /// Runs a command to its end; returns its exit status.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        try ChildProcess(executable, arguments).wait()
    }

    /// Sends `signal` (SIGTERM, SIGKILL, …).
    public func signal(_ signal: Int32) { _ = kill(pid, signal) }

    /// Waits for the process to end; returns its exit status (128 + the signal when a signal ended it).
    @discardableResult
    public func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Reads standard output until a line contains `marker` (or the output ends): that line.
    func readLine(containing marker: String) -> String? {
        readLine { $0.contains(marker) }
    }

    /// Reads standard output until a whole line satisfies `matches` (or the output ends): that line.
    public func readLine(where matches: (String) -> Bool) -> String? {
        guard let output else { return nil }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(output, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            pending += chunk[0..<count]
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if matches(line) { return line }
            }
        }
    }

    /// Reads standard output to its end.
    public func readToEnd() -> String {
        guard let output else { return "" }
        var all: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = read(output, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return String(decoding: all, as: UTF8.self) }
            all += chunk[0..<count]
        }
    }

    /// Standard output, line by line, read on a thread of its own (blocking reads stay off the concurrency pool).
    /// Ends when the output does.
    public func lines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        guard let output else {
            continuation.finish()
            return stream
        }
        let thread = Thread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = read(output, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                pending += chunk[0..<count]
                while let newline = pending.firstIndex(of: 10) {
                    continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }

    /// glibc's `pipe2`, which Swift's Glibc module does not declare (it needs `_GNU_SOURCE`).
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private static let pipe2: Pipe2? = dlsym(nil, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does not declare.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }
}
