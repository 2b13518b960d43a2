// Courier — Apache-2.0
import CourierHarness
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// SPEC §9.1 checked where it takes effect: the system calls of the running server. The server runs under `strace`;
/// a client sends messages one at a time, each after the previous ack. Each ack must have been written to the socket
/// after an fsync of the WAL that finished after the previous ack: otherwise a power loss right after the ack could
/// lose the message. The same check against `--durability normal` must find acks without their fsync, which shows
/// that it can fail.
@Suite("Durability from outside the process", .timeLimit(.minutes(5)))
struct DurabilityTests {
    static let sends = 200

    @Test("every acknowledged send waited for its own fsync of the WAL (strace, synchronous=FULL)")
    func everyAckFollowsItsFsync() async throws {
        let trace = try await Self.tracedSends(arguments: [])
        print("durability test: \(trace.acks) acks, \(trace.walSyncs) WAL fsyncs, \(trace.acksWithoutSync.count) acks without")
        #expect(trace.acks == Self.sends, "acks seen on the socket")
        #expect(trace.acksWithoutSync.isEmpty, "acks written before any fsync of the WAL: \(trace.acksWithoutSync)")
        #expect(trace.walSyncs >= Self.sends, "fsyncs of the WAL: \(trace.walSyncs) for \(Self.sends) commits")
    }

    @Test("the same check finds acks without an fsync under --durability normal (the opt-in)")
    func normalModeIsCaught() async throws {
        let trace = try await Self.tracedSends(arguments: ["--durability", "normal"])
        print(
            "durability test (--durability normal): \(trace.acks) acks, \(trace.walSyncs) WAL fsyncs, "
                + "\(trace.acksWithoutSync.count) acks without"
        )
        #expect(trace.acks == Self.sends)
        #expect(trace.acksWithoutSync.count > Self.sends / 2, "NORMAL syncs only at checkpoints")
    }

    /// Runs the server under strace, sends `sends` messages one at a time, stops it and reads the trace.
    static func tracedSends(arguments: [String]) async throws -> StraceLog.Summary {
        let strace = try #require(Binaries.which("strace"), "strace is needed (Debian package strace)")
        let folder = try TemporaryFolder()
        let log = folder.path + "/strace.txt"
        let server = try ServerProcess(
            .init(
                binary: Binaries.courierServer,
                arguments: arguments,
                folder: folder.path + "/data",
                wrapper: [strace, "-f", "-qq", "-y", "-s", "2048", "-o", log, "-e",
                    "trace=fsync,fdatasync,write,writev,sendmsg,sendto"]
            ),
            secret: Binaries.secret
        )
        try await server.register(["alice", "bob"])
        try await server.withClient("alice") { client in
            for index in 0..<sends {
                let reply = try await client.request {
                    .send($0, SendRequest(conversation: .direct("alice", "bob"), clientID: ClientMessageID(rawValue: "dur-\(index)"), body: "m\(index)")
                    )
                }
                guard case .ack(_, .send) = reply else { throw HarnessError.refused("\(reply)") }
            }
        }
        server.stop()
        return try StraceLog(contentsOf: log).summary(ackMarker: #"\"clientId\":\"dur-"#, walSuffix: "courier.sqlite-wal>")
    }
}

/// An `strace -f -y` log: which fsyncs of the WAL completed, and which acks were written, in the order they happened.
struct StraceLog {
    enum Event: Equatable {
        case walSynced
        case ack
    }

    struct Summary {
        let acks: Int
        let walSyncs: Int
        /// Indexes of acks with no completed WAL fsync since the previous ack.
        let acksWithoutSync: [Int]
    }

    let lines: [Substring]

    init(contentsOf path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        lines = text.split(separator: "\n")
    }

    /// Events in log order. A sync counts when it returns (`= 0` on its own line, or its `resumed` line); strace
    /// prints a line when it sees the event, and a write that depends on a sync starts after the sync returned.
    func events(ackMarker: String, walSuffix: String) -> [Event] {
        var pendingSync: Set<Substring> = []
        var events: [Event] = []
        for line in lines {
            guard let space = line.firstIndex(of: " ") else { continue }
            let pid = line[..<space]
            // strace pads the pid to five columns.
            let call = line[line.index(after: space)...].drop { $0 == " " }
            if call.hasPrefix("fsync(") || call.hasPrefix("fdatasync(") {
                guard call.contains(walSuffix) else { continue }
                if call.hasSuffix("<unfinished ...>") {
                    pendingSync.insert(pid)
                } else if call.hasSuffix("= 0") {
                    events.append(.walSynced)
                }
            } else if call.hasPrefix("<... fsync resumed>") || call.hasPrefix("<... fdatasync resumed>") {
                if pendingSync.remove(pid) != nil, call.hasSuffix("= 0") { events.append(.walSynced) }
            } else if call.contains(ackMarker), call.contains(#"\"request\":\"send\""#) {
                events.append(.ack)
            }
        }
        return events
    }

    func summary(ackMarker: String, walSuffix: String) -> Summary {
        var acks = 0
        var syncs = 0
        var syncedSinceLastAck = false
        var unsynced: [Int] = []
        for event in events(ackMarker: ackMarker, walSuffix: walSuffix) {
            switch event {
            case .walSynced:
                syncs += 1
                syncedSinceLastAck = true
            case .ack:
                if !syncedSinceLastAck { unsynced.append(acks) }
                acks += 1
                syncedSinceLastAck = false
            }
        }
        return Summary(acks: acks, walSyncs: syncs, acksWithoutSync: unsynced)
    }
}
