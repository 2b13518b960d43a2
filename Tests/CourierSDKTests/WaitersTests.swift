// Courier — Apache-2.0
import Testing

@testable import CourierSDK
import CourierWire

/// Results handed to tasks by key (sends by client id, requests by id): nobody waits for ever, nobody gets another's
/// answer.
@Suite("Waiting for results by key", .timeLimit(.minutes(1)))
struct WaitersTests {
    @Test("two waiters on one key (two sends with one client id) both get the result")
    func twoWaitersOneKey() async throws {
        let waiters = Waiters<String, Int>()
        waiters.register("c1")
        waiters.register("c1")
        async let first = waiters.wait(for: "c1")
        async let second = waiters.wait(for: "c1")
        // Resolve only once both are suspended or the result is kept for them: either way both get it.
        waiters.resolve("c1", with: .success(7))
        #expect(try await first == 7)
        #expect(try await second == 7)
    }

    @Test("a result that arrives before its registered waiters is kept for each of them, then forgotten")
    func resultBeforeWaiters() async throws {
        let waiters = Waiters<String, Int>()
        waiters.register("c1")
        waiters.register("c1")
        waiters.resolve("c1", with: .success(3))
        #expect(try await waiters.wait(for: "c1") == 3)
        #expect(try await waiters.wait(for: "c1") == 3)
        // Both took it: a third, unregistered wait would not find it.
        waiters.resolve("c1", with: .success(4))
        waiters.register("c1")
        waiters.resolve("c1", with: .success(5))
        #expect(try await waiters.wait(for: "c1") == 5)
    }

    @Test("a waiter that times out leaves the other waiter of its key waiting for the result")
    func timeoutLeavesOthers() async throws {
        let waiters = Waiters<String, Int>()
        waiters.register("c1")
        waiters.register("c1")
        await #expect(throws: CourierError.timedOut) {
            try await waiters.wait(for: "c1", timeout: .milliseconds(1), clock: ContinuousClock())
        }
        async let patient = waiters.wait(for: "c1")
        waiters.resolve("c1", with: .success(9))
        #expect(try await patient == 9)
    }
}
