// Courier — Apache-2.0
public import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Crypto
internal import Synchronization
public import CourierServerCore

/// Imports history (docs/import.md) through the store's own writes — the append, the group change, the read and the
/// recall every live request uses, each deciding from what its transaction reads — with every entry and read
/// announced to nobody: no webhook event, no push, no notification, no device told. Lines are applied in order:
/// messages, and recalls of them, go to the store 1,024 at a time in one operation; anything else waits for them.
public final class HistoryImport: Sendable {
    /// What an import did, as `courier-server import` prints it and `POST /v1/import` answers it.
    public struct Summary: Codable, Hashable, Sendable {
        public var lines = 0
        public var accounts = 0
        public var groups = 0
        public var messages = 0
        public var reads = 0
        public var recalls = 0
        /// Entries stored before (a second run of the same file reports each entry as one).
        public var duplicates = 0
        /// The first lines, which an earlier run of the same source applied: not read again.
        public var resumedAfter = 0
        public var skippedCount = 0
        /// The first 100 skipped lines.
        public var skipped: [Skipped] = []

        public init() {}

        mutating func skip(_ line: Int, _ error: RequestError) {
            skippedCount += 1
            if skipped.count < 100 { skipped.append(Skipped(line: line, code: error.code.rawValue, detail: error.message)) }
        }

        /// Counts a write's outcome: a new entry under `counter`; a duplicate (a message recalled before, too: nothing
        /// more to erase); or a refusal, the line skipped.
        mutating func count(_ outcome: Result<AppendOutcome, StorageError>, line: Int, as counter: WritableKeyPath<Summary, Int>) {
            switch outcome {
            case .success(let result): if result.isDuplicate { duplicates += 1 } else { self[keyPath: counter] += 1 }
            case .failure(.alreadyRecalled): duplicates += 1
            case .failure(let error): skip(line, error)
            }
        }

        /// A write the store refused. A uniqueness conflict that outlived the store's retry (PostgreSQL) is a line
        /// whose id another entry has: what SQLite says as `messageIDInUse`.
        mutating func skip(_ line: Int, _ error: StorageError) {
            switch error {
            case .conflict: skip(line, RequestError(.messageIDInUse, "The line's id is the id of another entry."))
            default: skip(line, RequestError(error))
            }
        }
    }

    /// A valid line that history does not allow, skipped.
    public struct Skipped: Codable, Hashable, Sendable {
        public let line: Int
        public let code: String
        public let detail: String
    }

    /// The line an import stopped at (`import.invalidRecord`): nothing of it or after it was written.
    public struct Stopped: Error, Sendable {
        public let line: Int
        public let detail: String
    }

    /// Messages (and recalls of them) appended in one store operation.
    static let appendChunk = 1024
    /// Lines parsed before any of them is applied.
    public static let batchLines = 4096

    /// Lines parsed: the records before the first invalid line, and that line.
    public struct Batch: Sendable {
        fileprivate let records: [(line: Int, record: HistoryRecord)]
        /// The lines it covers up to its invalid line, or all of them.
        public let lines: Int
        fileprivate let stop: InvalidHistoryLine?
        /// Those lines, for the source's digest.
        fileprivate let texts: ArraySlice<Substring>
    }

    let store: any CourierStore
    private let limits: CourierServerConfiguration.Limits
    /// The source whose progress is kept (``ImportProgress``), when there is one.
    private let source: String?
    let state = Mutex(State())

    struct State {
        var summary = Summary()
        /// Accounts registered by this import (or found registered).
        var known: Set<AccountID> = []
        /// The lines an earlier run applied, not applied again.
        var resumeAfter = 0
        /// The conversation and sender of what is stored under the ids of the messages this import wrote (appended,
        /// or found stored before), for the recalls that follow them (at most ``rememberedMessages``). Only what the
        /// store answered: a line it refused names nothing.
        var appended: [MessageID: (ConversationID, AccountID)] = [:]
        /// The lines seen so far (applied, or applied by an earlier run) and their digest.
        var seen = 0
        var digest = SHA256()
    }

    /// - Parameter source: The name of what is imported (a file's name): its progress is kept in the database, and a
    ///   run of the same source starts after the lines an earlier one applied.
    public init(store: any CourierStore, limits: CourierServerConfiguration.Limits = .init(), source: String? = nil) {
        self.store = store
        self.limits = limits
        self.source = source
    }

    /// Where an earlier run of this source got to, to be checked against the file's first lines
    /// (``resume(after:digest:)``).
    public func earlierProgress() async throws -> ImportProgress? {
        guard let source else { return nil }
        return try await store.importProgress(of: source)
    }

    /// The lowercase hex SHA-256 of `lines`, each with its newline: what ``ImportProgress/digest`` holds.
    public static func digest(of lines: some Sequence<Substring>) -> String {
        var hasher = SHA256()
        hash(lines, into: &hasher)
        return hasher.finalize().lowercaseHex
    }

    private static func hash(_ lines: some Sequence<Substring>, into hasher: inout SHA256) {
        for line in lines {
            hasher.update(data: Array(line.utf8))
            hasher.update(data: [0x0A])
        }
    }

    /// `text`'s lines, split on the newline byte (splitting on characters walks every grapheme); a last newline ends
    /// the last line rather than starting an empty one.
    public static func lines(of text: String) -> [Substring] {
        var lines = text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map { Substring($0) }
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Starts after the first `lines` lines, which an earlier run of this source applied (their digest checked by the
    /// caller): they are read for the digest, not applied again.
    public func resume(after progress: ImportProgress) {
        state.withLock { state in
            state.resumeAfter = progress.lines
            state.summary.resumedAfter = progress.lines
        }
    }

    public var summary: Summary { state.withLock { $0.summary } }

    /// Applies `lines`, numbered from `first`, in order. Throws ``Stopped`` at the first line that is not a valid
    /// record (the lines before it are applied), or the store's error when the database fails.
    public func apply(_ lines: [Substring], first: Int) async throws {
        try await apply(parse(lines, first: first))
    }

    /// Parses `lines`, numbered from `first`, up to the first that is not a valid record (no I/O: a caller may parse
    /// the next batch while one is applied).
    public func parse(_ lines: [Substring], first: Int) -> Batch {
        var records: [(line: Int, record: HistoryRecord)] = []
        let resumeAfter = state.withLock { $0.resumeAfter }
        // Bytes, not characters: a line is blank when it has only spaces, tabs or a carriage return.
        for (offset, text) in lines.enumerated() where first + offset > resumeAfter
            && !text.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D })
        {
            do {
                records.append((first + offset, try HistoryRecord(line: text, number: first + offset, limits: limits)))
            } catch {
                let count = error.line - first
                return Batch(records: records, lines: count, stop: error, texts: lines[..<count])
            }
        }
        return Batch(records: records, lines: lines.count, stop: nil, texts: lines[...])
    }

    /// Applies a parsed batch, then records the source's progress; throws ``Stopped`` at its invalid line once the
    /// records before it are applied (and recorded).
    public func apply(_ batch: Batch) async throws {
        try await apply(batch.records)
        let progress = state.withLock { state -> ImportProgress in
            state.summary.lines += batch.lines
            state.seen += batch.lines
            Self.hash(batch.texts, into: &state.digest)
            let digest = state.digest.finalize().lowercaseHex
            return ImportProgress(lines: state.seen, digest: digest)
        }
        if let source, progress.lines > state.withLock({ $0.resumeAfter }) {
            try await store.setImportProgress(progress, of: source, at: Timestamp.now())
        }
        if let stop = batch.stop { throw Stopped(line: stop.line, detail: stop.detail) }
    }

    /// Erases what the imported recalls left in old page images (call once, at the end); `false` when that could not
    /// be done now (a reader held an old snapshot): the purge stays owed, and a server on the database retries it.
    public func finish() async -> Bool {
        do {
            try await store.purgeRecalledPages()
            return true
        } catch {
            return false
        }
    }

    private func apply(_ records: [(line: Int, record: HistoryRecord)]) async throws {
        try await register(records.map(\.record))
        var pending = records[...]
        while let (line, record) = pending.first {
            switch record {
            case .account:
                // A run of accounts: their profiles in one write, told to nobody (devices ask for what changed when
                // they connect).
                let run = pending.prefix { if case .account = $0.record { true } else { false } }
                pending.removeFirst(run.count)
                let profiles = run.compactMap { entry -> AccountProfileChange? in
                    guard case .account(let account, _, let profile?) = entry.record else { return nil }
                    return AccountProfileChange(account: account, fields: profile)
                }
                if !profiles.isEmpty { _ = try await store.setAccountProfiles(profiles, at: .now(), announced: false) }
            case .message, .recall:
                let run = pending.prefix { entry in
                    switch entry.record {
                    case .message, .recall: true
                    default: false
                    }
                }
                pending.removeFirst(run.count)
                try await entries(run)
            case .read:
                // Reads commute (a position only moves forward): a run of them runs together.
                let run = pending.prefix { if case .read = $0.record { true } else { false } }
                pending.removeFirst(run.count)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (line, record) in run {
                        guard case .read(let reader, let conversation, let upTo, let time, let shared) = record else { continue }
                        group.addTask { try await self.read(line, reader, conversation, upTo, time, shared) }
                    }
                    try await group.waitForAll()
                }
            case .group(let entry):
                pending.removeFirst()
                // A group record always carries its change (``HistoryRecord``).
                guard let change = entry.group else { continue }
                try await outcome(line, as: \.groups) { () throws(StorageError) in
                    change.action == .created
                        ? try await store.createGroup(entry, members: change.accounts)
                        : try await store.changeGroup(entry)
                }
            }
        }
    }

}
