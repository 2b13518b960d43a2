// Courier — Apache-2.0
import CourierHarness
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `import --messages N --conversations C`: writes a history file of N messages in C conversations (nine in ten
/// direct, the rest groups of five), each conversation's lines together in time order as the vendor converters write
/// them, one recall in a hundred messages and each member's read position at the end, then times
/// `courier-server import` of it into a fresh data folder (SQLite, the given durability). The file is written before
/// the clock starts; the figure is messages stored per second of the import's wall time.
enum ImportScenario {
    static func run(
        messages: Int,
        conversations: Int,
        binary: String,
        durability: String,
        maxSeconds: Double
    ) throws -> Report {
        let folder = NSTemporaryDirectory() + "courier-bench-import-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/history.jsonl"
        let lines = try writeHistory(to: file, messages: messages, conversations: conversations)
        let fileBytes = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0

        var before = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &before)
        let start = nowMilliseconds()
        let process = try ChildProcess(
            binary,
            ["import", file, "--data-dir", folder + "/data", "--durability", durability],
            captureOutput: true
        )
        let killer = DispatchWorkItem { process.signal(SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + maxSeconds, execute: killer)
        let output = process.readToEnd()
        let status = process.wait()
        killer.cancel()
        let seconds = (nowMilliseconds() - start) / 1000
        guard status == 0 else { throw HarnessError.refused("courier-server import exited \(status): \(output)") }
        var after = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &after)
        func cpu(_ usage: rusage) -> Double {
            Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
                + Double(usage.ru_stime.tv_usec) / 1e6
        }
        struct Summary: Decodable { let messages: Int; let recalls: Int; let reads: Int; let skippedCount: Int }
        let summaryLine = output.split(separator: "\n").last.map(String.init) ?? ""
        let summary = try JSONDecoder().decode(Summary.self, from: Data(summaryLine.utf8))
        guard summary.messages == messages, summary.skippedCount == 0 else {
            throw HarnessError.refused("the import stored \(summary.messages) of \(messages) messages: \(summaryLine)")
        }
        let databaseBytes = ["courier.sqlite", "courier.sqlite-wal"].reduce(0) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: folder + "/data/" + name)[.size] as? Int) ?? 0)
        }
        var report = Report()
        report["scenario"] = .string("import")
        report["messages"] = .integer(messages)
        report["conversations"] = .integer(conversations)
        report["lines"] = .integer(lines)
        report["file_mb"] = .number(Double(fileBytes) / 1_048_576)
        report["seconds"] = .number(seconds)
        report["msg_per_sec"] = .integer(Int(Double(messages) / seconds))
        report["cpu_sec_per_1k"] = .number((cpu(after) - cpu(before)) / Double(messages) * 1000)
        report["reads"] = .integer(summary.reads)
        report["recalls"] = .integer(summary.recalls)
        report["database_mb"] = .number(Double(databaseBytes) / 1_048_576)
        report["durability"] = .string(durability)
        if let floor = BenchOptions.fsyncLatencies(in: folder) { report["fsync_floor_ms"] = .latency(floor) }
        report["cores"] = .integer(ProcessInfo.processInfo.activeProcessorCount)
        return report
    }

    /// Writes the history file; returns its number of lines.
    static func writeHistory(to path: String, messages: Int, conversations: Int) throws -> Int {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: path) else { throw HarnessError.refused("cannot write \(path)") }
        defer { try? handle.close() }
        var buffer = ""
        var lines = 0
        func emit(_ line: String) throws {
            buffer += line
            buffer += "\n"
            lines += 1
            if buffer.utf8.count > 1 << 20 {
                try handle.write(contentsOf: Data(buffer.utf8))
                buffer = ""
            }
        }
        let groups = max(conversations / 10, conversations > 1 ? 1 : 0)
        let directs = conversations - groups
        // Accounts: each direct conversation k is between a(k) and a(k + 1); groups take five consecutive accounts.
        let accounts = max(directs + 1, 5)
        func account(_ index: Int) -> String { "a\(index % accounts)" }
        func members(_ conversation: Int) -> [String] {
            conversation < directs
                ? [account(conversation), account(conversation + 1)]
                : (0..<5).map { account((conversation - directs) * 5 + $0) }
        }
        let start: Int64 = 1_577_836_800_000
        for conversation in directs..<conversations {
            let group = members(conversation)
            try emit(
                #"{"kind":"group","id":"g\#(conversation)-created","group":"g\#(conversation)","action":"created","by":"\#(group[0])","accounts":[\#(group.dropFirst().map { "\"\($0)\"" }.joined(separator: ","))],"time":\#(start)}"#
            )
        }
        var written = 0
        var last: [Int: String] = [:]
        for conversation in 0..<conversations {
            let count = messages / conversations + (conversation < messages % conversations ? 1 : 0)
            for round in 0..<count {
                let member = members(conversation)
                let from = member[(round + conversation) % member.count]
                let time = start + Int64(written) * 10
                let target =
                    conversation < directs
                    ? #""to":"\#(member[0] == from ? member[1] : member[0])""# : #""group":"g\#(conversation)""#
                let id = "m\(written)"
                try emit(
                    #"{"kind":"message","id":"\#(id)","from":"\#(from)",\#(target),"time":\#(time),"body":"message \#(written) of an imported history, with some words to make it a typical chat line"}"#
                )
                if written % 100 == 50 {
                    try emit(#"{"kind":"recall","id":"r\#(written)","message":"\#(id)","by":"\#(from)","time":\#(time + 1)}"#)
                }
                last[conversation] = id
                written += 1
            }
        }
        let end = start + Int64(written) * 10
        for conversation in 0..<conversations {
            guard let upTo = last[conversation] else { continue }
            let member = members(conversation)
            for reader in member {
                let place =
                    conversation < directs
                    ? #""with":"\#(member[0] == reader ? member[1] : member[0])""# : #""group":"g\#(conversation)""#
                try emit(#"{"kind":"read","account":"\#(reader)",\#(place),"upTo":"\#(upTo)","time":\#(end)}"#)
            }
        }
        try handle.write(contentsOf: Data(buffer.utf8))
        return lines
    }
}
