// Courier — Apache-2.0
import ArgumentParser
import CourierBackends
import CourierServer
import CourierImport
import CourierStorage
import CourierDomain
import CourierStoragePostgres
import CourierStorageSQLite
import Foundation
import Logging
import ServiceLifecycle

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import history from a file of Courier history lines (docs/import.md) into the configured database.",
        discussion: """
            Idempotent and resumable: every entry is stored under its sender and its line's id, and the database keeps \
            how far each source got, so running the same file again after a crash or a fix continues where it was. \
            Imported history fires no webhook and no push. With SQLite, stop the server first (or use POST \
            /v1/import). Exit status: 0 when every line was read (some may have been skipped: see the summary), 65 at \
            a line that is not valid (nothing of it or after it is written), 64 when the file cannot be read, 1 when \
            the database fails.
            """
    )
    @Argument(help: "The file of history lines (JSON Lines).") var file: String
    @Option(help: "The name its progress is kept under (default: the file's name).") var source: String?
    @Option(help: "Print progress every this many lines (at the end of a batch of 4,096).") var progressLines = 100_000
    @OptionGroup var options: Options

    func run() async throws {
        PrivateFiles.restrictNewFiles()
        let settings = try options.settings()
        guard let input = FileHandle(forReadingAtPath: file) else { throw ValidationError("Cannot read \(file).") }
        let (backend, folderLock) = try settings.openBackend(
            logger: Logger(label: "courier.import", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let configuration = settings.configuration(secret: .random())
        let name = source ?? (file as NSString).lastPathComponent
        let history = HistoryImport(store: backend.store, limits: configuration.limits, source: name)
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Void.self) { group in
            // The PostgreSQL pool runs beside the import (SQLite's owed purges are done by the import's end).
            if settings.postgresURL != nil {
                for service in backend.services { group.addTask { try? await service.run() } }
            }
            defer { group.cancelAll() }
            do {
                try await backend.prepare()
                if let earlier = try await history.earlierProgress() {
                    if try Self.digest(ofFirst: earlier.lines, in: file) == earlier.digest {
                        history.resume(after: earlier)
                        note("\(name): continuing after line \(earlier.lines), where an earlier import of it got to")
                    } else {
                        note("\(name): its first \(earlier.lines) lines are not those an earlier import applied; reading it from the start")
                    }
                }
                try await Self.read(input, into: history, progressEvery: max(progressLines, 1))
                if !(await history.finish()) {
                    note("A reader kept the WAL from being truncated: old page images of recalled bodies stay until the server starts (it retries).")
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        withExtendedLifetime(folderLock) {}
        let summary = history.summary
        say(String(decoding: try JSONEncoder.sorted.encode(summary), as: UTF8.self))
        switch outcome {
        case .success: break
        case .failure(let stopped as HistoryImport.Stopped):
            note("line \(stopped.line): import.invalidRecord: \(stopped.detail)")
            note("Lines before it are stored; fix it and run the same command again to continue.")
            throw ExitCode(65)
        case .failure(let error):
            note("The database failed: \(error). What was stored stays; run the same command again to continue.")
            throw ExitCode(1)
        }
    }

    /// The digest (``HistoryImport/digest(of:)``) of the first `count` lines of the file at `path`; `nil` when it has
    /// fewer.
    static func digest(ofFirst count: Int, in path: String) throws -> String? {
        guard let input = FileHandle(forReadingAtPath: path) else { return nil }
        let reader = LineReader(input)
        var lines: [Substring] = []
        while lines.count < count, let batch = try reader.next() { lines += batch.lines.prefix(count - lines.count) }
        return lines.count == count ? HistoryImport.digest(of: lines) : nil
    }

    /// Reads and parses the file a batch ahead of the batch being written, with progress every `progressEvery`
    /// lines.
    static func read(_ input: FileHandle, into history: HistoryImport, progressEvery: Int) async throws {
        let start = ContinuousClock.now
        let reader = LineReader(input)
        var done = 0
        var reported = 0
        var next = try reader.next().map { history.parse($0.lines, first: $0.first) }
        while let batch = next {
            async let following = reader.next().map { history.parse($0.lines, first: $0.first) }
            try await history.apply(batch)
            next = try await following
            done += batch.lines
            if done - reported >= progressEvery {
                reported = done
                let seconds = (ContinuousClock.now - start) / .seconds(1)
                note("\(reported) lines (\(Int(Double(reported) / max(seconds, 0.001))) lines/s)")
            }
        }
    }
}

/// A file's lines, a batch at a time, read in 1 MiB chunks. Used by one task at a time (the import reads the next
/// batch while it writes the one before).
final class LineReader: @unchecked Sendable {
    private let input: FileHandle
    private var buffer: [UInt8] = []
    private var pending: ArraySlice<Substring> = []
    private var number = 1
    private var ended = false

    init(_ input: FileHandle) {
        self.input = input
    }

    /// The next ``HistoryImport/batchLines`` lines (fewer at the end) and the number of the first; `nil` at the end.
    func next() throws -> (lines: [Substring], first: Int)? {
        while pending.count < HistoryImport.batchLines, !ended {
            let chunk = try input.read(upToCount: 1 << 20) ?? Data()
            ended = chunk.isEmpty
            buffer.append(contentsOf: chunk)
            guard let cut = ended ? buffer.endIndex : buffer.lastIndex(of: UInt8(ascii: "\n")).map({ $0 + 1 }) else {
                continue
            }
            let text = String(decoding: buffer[..<cut], as: UTF8.self)
            buffer.removeSubrange(..<cut)
            pending += HistoryImport.lines(of: text)
        }
        guard !pending.isEmpty else { return nil }
        let lines = Array(pending.prefix(HistoryImport.batchLines))
        pending = pending.dropFirst(lines.count)
        defer { number += lines.count }
        return (lines, number)
    }
}

extension JSONEncoder {
    /// Keys sorted: the same summary prints the same bytes.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

/// Writes a line to standard error at once.
func note(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
