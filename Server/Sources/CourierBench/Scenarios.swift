// Courier — Apache-2.0
import CourierHarness
import CourierServer
import CourierWire
import Foundation
import Synchronization

/// Latency samples in milliseconds.
struct Samples: Sendable {
    var values: [Double] = []
    mutating func add(_ value: Double) { values.append(value) }
    func percentile(_ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let index = min(sorted.count - 1, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1)
        return (sorted[max(0, index)] * 1000).rounded() / 1000
    }
    var summary: [String: Double] { ["p50": percentile(50), "p99": percentile(99)] }
}

/// Monotonic milliseconds.
func nowMilliseconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000 }

struct BenchContext: Sendable {
    let server: ServerProcess
    let tokens: TokenAuthority
    let deadline: Double

    func token(_ account: AccountID) async throws -> String { try await tokens.token(for: account) }

    func checkDeadline(_ what: String) throws {
        if nowMilliseconds() > deadline { throw HarnessError.timedOut(what) }
    }
}

/// Holds connected clients open until released.
final class Gate: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    init() { (stream, continuation) = AsyncStream.makeStream(of: Void.self) }
    func wait() async { for await _ in stream {} }
    func open() { continuation.finish() }
}

/// Runs `body` with `count` connected clients (connected `parallelism` at a time), then closes them.
func withConnectedClients<T: Sendable>(
    _ context: BenchContext,
    accounts: [AccountID],
    parallelism: Int = 32,
    onEvent: @escaping @Sendable (Int, ServerEvent) -> Void = { _, _ in },
    _ body: @Sendable ([ProtocolClient]) async throws -> T
) async throws -> T {
    let clients = accounts.indices.map { index in ProtocolClient { onEvent(index, $0) } }
    let gate = Gate()
    let ready = AsyncStream.makeStream(of: Int.self)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        var started = 0
        var connected = 0
        func startNext() async throws {
            let index = started
            started += 1
            let token = try await context.token(accounts[index])
            group.addTask {
                try await clients[index].run(
                    url: context.server.url,
                    token: token,
                    account: accounts[index],
                    device: "bench"
                ) {
                    ready.continuation.yield(index)
                    await gate.wait()
                }
            }
        }
        var iterator = ready.stream.makeAsyncIterator()
        while started < min(parallelism, accounts.count) { try await startNext() }
        while connected < accounts.count {
            guard await iterator.next() != nil else { throw HarnessError.closed }
            connected += 1
            if started < accounts.count { try await startNext() }
            try context.checkDeadline("connecting clients")
        }
        let result = try await body(clients)
        gate.open()
        try await group.waitForAll()
        return result
    }
}
