// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierWire
import CourierServer
import CourierTestSupport
import Foundation
import Testing

/// Push tokens: devices register them over the wire, the app's backend reads them over REST.
@Suite("Push tokens", .timeLimit(.minutes(5)))
struct PushTokenTests {
    struct Listed: Decodable, Equatable {
        let device: String
        let platform: String
        let token: String
        let sandbox: Bool
    }
    struct Listing: Decodable { let tokens: [Listed] }

    func tokens(of account: String, on server: TestServer) async throws -> [Listed] {
        let (status, body) = try await server.restResponse("GET", "/v1/accounts/\(account)/push-tokens")
        #expect(status == 200)
        return try JSONDecoder().decode(Listing.self, from: body).tokens
    }

    @Test("each device keeps one token; a token moves with the install; unregistering removes it", arguments: ServerBackend.available)
    func lifecycle(backend: ServerBackend) async throws {
        try await withTestServer(on: backend) { server in
            try await server.register("alice", "bob")
            let phone = try await server.connectedClient("alice", device: "phone")
            let tablet = try await server.connectedClient("alice", device: "tablet")
            let apns = Data([0x0a, 0xff, 0x10, 0x00] + Array(repeating: 0x7e, count: 28))
            try await phone.registerPushToken(apns: apns, sandbox: true)
            try await tablet.registerPushToken(fcm: "fcm:tablet-1")
            let hex = "0aff1000" + String(repeating: "7e", count: 28)
            #expect(
                try await tokens(of: "alice", on: server) == [
                    Listed(device: "phone", platform: "apns", token: hex, sandbox: true),
                    Listed(device: "tablet", platform: "fcm", token: "fcm:tablet-1", sandbox: false),
                ]
            )
            // A new token replaces the device's old one.
            try await tablet.registerPushToken(fcm: "fcm:tablet-2")
            #expect(try await tokens(of: "alice", on: server).map(\.token) == [hex, "fcm:tablet-2"])

            // The phone now signs in as bob: its token follows the install, alice's phone has none left.
            let handedOver = try await server.connectedClient("bob", device: "phone")
            try await handedOver.registerPushToken(apns: apns, sandbox: true)
            #expect(try await tokens(of: "alice", on: server).map(\.device) == ["tablet"])
            #expect(try await tokens(of: "bob", on: server).map(\.token) == [hex])

            try await tablet.unregisterPushToken()
            #expect(try await tokens(of: "alice", on: server).isEmpty)

            // Registered while offline: sent when the client connects.
            await tablet.disconnect()
            try await tablet.registerPushToken(fcm: "fcm:tablet-3")
            #expect(try await tokens(of: "alice", on: server).isEmpty)
            try await tablet.connect(account: "alice", token: try await server.token(for: "alice"))
            #expect(try await tokens(of: "alice", on: server).map(\.token) == ["fcm:tablet-3"])
        }
    }

    @Test("bad tokens are refused with invalidArgument; the REST listing needs the secret and a known account")
    func refusals() async throws {
        try await withTestServer { server in
            try await server.register("alice")
            let raw = ProtocolClient()
            try await raw.run(
                url: server.webSocketURL.absoluteString,
                token: try await server.token(for: "alice"),
                account: "alice",
                device: "raw"
            ) {
                let bad: [PushTokenRequest] = [
                    .init(platform: .apns, token: ""),
                    .init(platform: .apns, token: "has space"),
                    .init(platform: .apns, token: String(repeating: "a", count: 4097)),
                    .init(platform: PushPlatform(rawValue: "pigeon"), token: "abc"),
                    .init(platform: nil, token: "abc"),
                ]
                for request in bad {
                    let reply = try await raw.request { .pushToken($0, request) }
                    guard case .error(_, let error) = reply else {
                        Issue.record("accepted \(request): \(reply)")
                        continue
                    }
                    #expect(error.code == .invalidArgument)
                }
                let fine = try await raw.request { .pushToken($0, .init(platform: .fcm, token: "ok")) }
                guard case .ack(_, .pushToken(let ack)) = fine else {
                    Issue.record("refused: \(fine)")
                    return
                }
                #expect(ack.registered)
            }
            #expect(try await tokens(of: "alice", on: server).map(\.token) == ["ok"])
            #expect(try await server.rest("GET", "/v1/accounts/alice/push-tokens", secret: false).status == 401)
            let unknown = try await server.rest("GET", "/v1/accounts/nobody/push-tokens")
            #expect(unknown.status == 404 && unknown.code == "account.notFound")
        }
    }
}
