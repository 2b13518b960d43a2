// Courier — Apache-2.0
import CourierSDK
import CourierWire
import CourierServer
import CourierStorage
import CourierDomain
import CourierStorageSQLite
import CourierTestSupport
import Foundation
import Testing

@Suite("Reconnect and delegates", .timeLimit(.minutes(5)))
struct ReconnectAndDelegateTests {
    let conversation = ConversationID.direct("alice", "bob")

    @Test("a connected client reconnects by itself when the server restarts, and catches up")
    func reconnectsAcrossRestart() async throws {
        let folder = try TemporaryFolder()
        let location = SQLiteStore.Location.file(folder.path + "/courier.sqlite")
        let (port, bob) = try await Self.firstServer(at: location, backoff: .milliseconds(20), maximum: .milliseconds(100))
        let client = bob
        let events = client.events()
        let states = client.events()
        try await withTestServer(
            location: location,
            configure: { $0.http.port = port },
            { server in
                let alice = try await server.connectedClient("alice")
                let sent = try await alice.send("after the restart", to: conversation).stored()
                let received = try await events.first(timeout: .seconds(20)) { $0.receivedMessage }
                #expect(received.id == sent.id)
                let reconnected = try await states.first(timeout: .seconds(20)) {
                    $0.connectionState == .connected ? true : nil
                }
                #expect(reconnected)
                await client.disconnect()
            }
        )
    }

    /// Runs a first server at `location` on a port outside the system's ephemeral range (32768–60999), so that no
    /// other test's port-0 server can take it while this one restarts (another port if it is taken), with bob
    /// connected through a client that reconnects with `backoff`; answers the port and the client, the server stopped.
    static func firstServer(
        at location: SQLiteStore.Location,
        backoff initial: Duration,
        maximum: Duration
    ) async throws -> (Int, CourierClient) {
        var bob: CourierClient?
        var port = 0
        for attempt in 1...20 {
            port = Int.random(in: 26_000..<32_000)
            do {
                let fixed = port
                try await withTestServer(
                    location: location,
                    configure: { $0.http.port = fixed },
                    { server in
                        try await server.register("alice", "bob")
                        var configuration = CourierClient.Configuration(serverURL: server.webSocketURL, store: .inMemory)
                        configuration.reconnectBackoff = Backoff(initial: initial, maximum: maximum)
                        let client = try CourierClient(configuration: configuration)
                        try await client.connect(account: "bob", token: try await server.token(for: "bob"))
                        bob = client
                    }
                )
                break
            } catch where attempt < 20 && "\(error)".contains("Address already in use") {
                continue
            }
        }
        return (port, try #require(bob))
    }

    @Test("reconnectNow() ends a long backoff: the app in the foreground is connected at once, not 30 s later")
    func reconnectNow() async throws {
        let folder = try TemporaryFolder()
        let location = SQLiteStore.Location.file(folder.path + "/courier.sqlite")
        // A backoff of 30–60 s (a minute, with jitter): the client waits that long after the server went away.
        let (port, bob) = try await Self.firstServer(at: location, backoff: .seconds(60), maximum: .seconds(60))
        // Subscribed first, then looked at: the move to waiting is seen whether it came before or after.
        let states = bob.events()
        if bob.connectionState != .waitingToReconnect {
            _ = try await states.first(timeout: .seconds(20)) { $0.connectionState == .waitingToReconnect ? true : nil }
        }
        try await withTestServer(
            location: location,
            configure: { $0.http.port = port },
            { server in
                // Back, but the client sleeps out its backoff: it is connected well within it only if asked.
                bob.reconnectNow()
                let reconnected = try await states.first(timeout: .seconds(20)) {
                    $0.connectionState == .connected ? true : nil
                }
                #expect(reconnected)
                let alice = try await server.connectedClient("alice")
                let received = bob.events()
                let sent = try await alice.send("after the backoff", to: conversation).stored()
                #expect(try await received.first(timeout: .seconds(20)) { $0.receivedMessage }.id == sent.id)
                await bob.disconnect()
            }
        )
    }

    @Test("delegates get the same events on the main actor, in order")
    func delegates() async throws {
        try await withTestServer { server in
            try await server.register("alice", "bob")
            let recorder = RecordingDelegate()
            let bob = try server.client()
            bob.addDelegate(recorder)
            try await bob.connect(account: "bob", token: try await server.token(for: "bob"))
            let alice = try await server.connectedClient("alice")
            let events = bob.events()

            let first = try await alice.send("one", to: conversation).stored()
            let second = try await alice.send("two", to: conversation).stored()
            _ = try await events.collect(2) { $0.receivedMessage }
            await bob.disconnect()

            let received = await recorder.received
            #expect(received == [first.id, second.id])
            #expect(await recorder.states.first == .connecting)
        }
    }
}

@MainActor
final class RecordingDelegate: CourierClientDelegate {
    var received: [MessageID] = []
    var states: [ConnectionState] = []

    func courierClient(_ client: CourierClient, didReceive message: Message) {
        MainActor.assertIsolated()
        received.append(message.id)
    }

    func courierClient(_ client: CourierClient, didChangeConnectionState state: ConnectionState) {
        states.append(state)
    }
}
