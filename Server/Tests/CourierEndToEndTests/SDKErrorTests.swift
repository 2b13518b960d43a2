// Courier — Apache-2.0
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// The SDK's errors say what to do: a client without an account yet, a call that needs the server
/// while offline, a cancelled call — each its own error, against a real server.
@Suite("SDK errors", .timeLimit(.minutes(3)))
struct SDKErrorTests {
    @Test("no account yet is noAccount; a call that needs the server while offline is notConnected; a cancelled call is cancelled")
    func errorsSayWhatToDo() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let conversation = ConversationID.direct("alice", "bob")

            // Never connected: the local store has no account, nor does the server know who asks.
            let fresh = try server.client()
            await #expect(throws: CourierError.noAccount) { _ = try await fresh.messages(in: conversation) }
            await #expect(throws: CourierError.noAccount) { _ = try await fresh.history(in: conversation) }

            // Connected once, then offline: local reads work, a call that needs the server says so.
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.send("hi", to: conversation).stored()
            await alice.disconnect()
            #expect(try await alice.messages(in: conversation).map(\.body) == ["hi"])
            await #expect(throws: CourierError.notConnected) { _ = try await alice.history(in: conversation) }
            await #expect(throws: CourierError.notConnected) { _ = try await alice.recall(sent.id, in: conversation) }
            #expect(CourierError.notConnected.code == "sdk.notConnected" && CourierError.noAccount.code == "sdk.noAccount")

            // A local read whose task is cancelled before it runs is cancelled, not a local-store failure.
            let call = Task {
                try? await Task.sleep(for: .seconds(3600))  // cancelled below: returns at once, the task cancelled
                return try await alice.messages(in: conversation)
            }
            call.cancel()
            await #expect(throws: CourierError.cancelled) { _ = try await call.value }
        }
    }
}
