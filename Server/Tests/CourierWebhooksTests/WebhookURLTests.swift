// Courier — Apache-2.0
import CourierDomain
import CourierStorage
import CourierTestSupport
import CourierWire
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import CourierWebhooks
@testable import CourierServerCore

/// Webhook URLs that cannot reach inside: an endpoint's URL is refused when its host is, or resolves to, a
/// link-local or cloud metadata address (always) or a loopback, private, unspecified or multicast one (unless
/// `--webhook-allow-private`); and every delivery's connection is checked again where it actually went, so a name
/// that resolves elsewhere later (DNS rebinding) sends nothing there.
@Suite("Webhook URLs", .timeLimit(.minutes(2)))
struct WebhookURLTests {
    typealias Kind = WebhookAddressPolicy.Kind

    struct Problem: Decodable { let code: String; let detail: String }
    struct Endpoint: Decodable { let id: String; let url: String }
    struct Endpoints: Decodable { let endpoints: [Endpoint] }
    struct Delivery: Decodable { let state: String; let attempts: Int; let lastError: String? }
    struct Deliveries: Decodable { let deliveries: [Delivery] }

    static let strict = WebhookAddressPolicy(allowPrivate: false)
    static let lenient = WebhookAddressPolicy(allowPrivate: true)

    // MARK: The ranges

    @Test(
        "every address is classed by its range; an IPv6 form that carries an IPv4 address is classed as that address",
        arguments: [
            ("169.254.169.254", Kind.metadata), ("100.100.100.200", .metadata), ("169.254.170.2", .linkLocal),
            ("169.254.0.1", .linkLocal), ("127.0.0.1", .loopback), ("127.255.0.9", .loopback),
            ("10.0.0.1", .privateNetwork), ("172.16.0.1", .privateNetwork), ("172.31.255.255", .privateNetwork),
            ("192.168.1.1", .privateNetwork), ("100.64.0.1", .privateNetwork), ("0.0.0.0", .unspecified),
            ("0.1.2.3", .unspecified), ("224.0.0.1", .multicast), ("239.255.255.250", .multicast),
            ("255.255.255.255", .reserved), ("240.0.0.1", .reserved), ("172.32.0.1", .global),
            ("192.169.0.1", .global), ("100.128.0.1", .global), ("8.8.8.8", .global),
            ("::", .unspecified), ("::1", .loopback), ("fe80::1", .linkLocal), ("febf::1", .linkLocal),
            ("fd00:ec2::254", .metadata), ("fd00:ec2::253", .privateNetwork), ("fd12:3456::1", .privateNetwork),
            ("fc00::1", .privateNetwork), ("fec0::1", .privateNetwork), ("ff02::1", .multicast),
            ("2001:4860:4860::8888", .global), ("2606:4700::1111", .global),
            ("::ffff:169.254.169.254", .metadata), ("::ffff:a9fe:a9fe", .metadata), ("::ffff:127.0.0.1", .loopback),
            ("::ffff:10.1.2.3", .privateNetwork), ("::ffff:0.0.0.0", .unspecified), ("::ffff:224.0.0.1", .multicast),
            ("::ffff:8.8.8.8", .global), ("::ffff:0:7f00:1", .loopback), ("64:ff9b::a9fe:a9fe", .metadata),
            ("64:ff9b::808:808", .global), ("::127.0.0.1", .loopback), ("::169.254.169.254", .metadata),
        ] as [(String, Kind)]
    )
    func kinds(address: String, kind: Kind) throws {
        let bytes = try #require(WebhookAddressPolicy.bytes(of: try SocketAddress(ipAddress: address, port: 0)))
        #expect(WebhookAddressPolicy.kind(of: bytes) == kind, "\(address)")
    }

    @Test("link-local and metadata addresses are refused whatever the setting; loopback, private and the rest only without allow-private")
    func policy() throws {
        for address in ["169.254.169.254", "169.254.10.10", "::ffff:169.254.169.254", "fe80::1", "fd00:ec2::254"] {
            let socket = try SocketAddress(ipAddress: address, port: 80)
            #expect(Self.strict.refusal(ofConnectionTo: socket, host: address) != nil, "\(address)")
            #expect(Self.lenient.refusal(ofConnectionTo: socket, host: address) != nil, "\(address)")
        }
        for address in ["127.0.0.1", "::1", "10.0.0.1", "192.168.0.10", "fc00::1", "0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1"] {
            let socket = try SocketAddress(ipAddress: address, port: 80)
            #expect(Self.strict.refusal(ofConnectionTo: socket, host: address) != nil, "\(address)")
            #expect(Self.lenient.refusal(ofConnectionTo: socket, host: address) == nil, "\(address)")
        }
        for address in ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            let socket = try SocketAddress(ipAddress: address, port: 443)
            #expect(Self.strict.refusal(ofConnectionTo: socket, host: address) == nil, "\(address)")
        }
        // A connection whose address is unknown carries nothing.
        #expect(Self.lenient.refusal(ofConnectionTo: nil, host: "example.com") != nil)
    }

    @Test("the reasons name the host, the address it went to and why; a name is judged by every address it resolves to")
    func reasons() throws {
        let loopback = try SocketAddress(ipAddress: "127.0.0.1", port: 80)
        let rebound = try #require(Self.strict.refusal(ofConnectionTo: loopback, host: "hooks.example"))
        #expect(rebound.contains("hooks.example resolved to 127.0.0.1, a loopback address"), "\(rebound)")
        #expect(rebound.contains("--webhook-allow-private true"), "\(rebound)")
        let metadataAddress = try SocketAddress(ipAddress: "169.254.169.254", port: 80)
        let metadata = try #require(Self.lenient.refusal(ofConnectionTo: metadataAddress, host: "169.254.169.254"))
        #expect(metadata.contains("169.254.169.254 is a cloud metadata address, which webhooks never reach"))

        // One refused address among those a name resolves to is enough.
        let mixed = [try SocketAddress(ipAddress: "8.8.8.8", port: 0), try SocketAddress(ipAddress: "10.0.0.7", port: 0)]
        let refusal = try #require(Self.strict.refusal(ofHost: "mixed.example", resolvedTo: mixed))
        #expect(refusal.contains("mixed.example resolves to 10.0.0.7, a private address"), "\(refusal)")
        #expect(Self.lenient.refusal(ofHost: "mixed.example", resolvedTo: mixed) == nil)
        // A name that resolves to nothing (yet) is left to the check of each connection.
        #expect(Self.strict.refusal(ofHost: "nothing.example", resolvedTo: []) == nil)
    }

    @Test("a host is resolved with getaddrinfo: localhost is loopback, and a literal is its own address")
    func resolution() async throws {
        let localhost = WebhookAddressPolicy.resolve("localhost")
        #expect(!localhost.isEmpty)
        #expect(localhost.allSatisfy { address in
            WebhookAddressPolicy.bytes(of: address).flatMap(WebhookAddressPolicy.kind(of:)) == .loopback
        })
        #expect(await Self.strict.refusal(ofHost: "localhost")?.contains("localhost resolves to") == true)
        #expect(await Self.lenient.refusal(ofHost: "localhost") == nil)
        #expect(WebhookAddressPolicy.resolve("::ffff:169.254.169.254").map(\.ipAddress) == ["::ffff:169.254.169.254"])
        #expect(await Self.lenient.refusal(ofHost: "::ffff:169.254.169.254") != nil)
    }

    // MARK: The REST API

    /// A refused creation: 400 `webhook.urlNotAllowed`, with why in the detail.
    static func refused(_ server: TestServer, _ method: String, _ path: String, url: String) async throws -> String {
        let (status, body) = try await server.restResponse(method, path, body: #"{"url":"\#(url)"}"#)
        let problem = try JSONDecoder().decode(Problem.self, from: body)
        #expect(status == 400 && problem.code == ErrorCode.webhookURLNotAllowed.rawValue, "\(url): \(problem)")
        return problem.detail
    }

    static func endpoints(_ server: TestServer) async throws -> [Endpoint] {
        let (status, body) = try await server.restResponse("GET", "/v1/webhooks")
        #expect(status == 200)
        return try JSONDecoder().decode(Endpoints.self, from: body).endpoints
    }

    @Test("without allow-private, metadata, mapped, loopback, private and localhost URLs are refused and nothing is created or changed")
    func refusedByDefault() async throws {
        try await withTestServer(configure: { $0.webhooks.allowPrivateAddresses = false }) { server in
            let metadata = try await Self.refused(
                server, "POST", "/v1/webhooks", url: "http://169.254.169.254/latest/meta-data"
            )
            #expect(metadata.contains("cloud metadata address"), "\(metadata)")
            _ = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://[::ffff:169.254.169.254]/")
            let loopback = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://127.0.0.1:9/")
            #expect(loopback.contains("loopback address") && loopback.contains("--webhook-allow-private"), "\(loopback)")
            let privateNetwork = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://10.0.0.1/")
            #expect(privateNetwork.contains("private address"), "\(privateNetwork)")
            let named = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://localhost:9/hooks")
            #expect(named.contains("localhost resolves to"), "\(named)")
            _ = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://[fe80::1]/")
            _ = try await Self.refused(server, "POST", "/v1/webhooks", url: "http://0.0.0.0:8080/")
            #expect(try await Self.endpoints(server).isEmpty, "nothing was created")

            // An address that is public as far as the policy goes (TEST-NET-1: nothing is sent to it, no event
            // is committed); changing it to a refused one changes nothing.
            let (created, body) = try await server.restResponse(
                "POST", "/v1/webhooks", body: #"{"url":"http://192.0.2.10/hooks"}"#
            )
            #expect(created == 201)
            let endpoint = try JSONDecoder().decode(Endpoint.self, from: body)
            _ = try await Self.refused(server, "PATCH", "/v1/webhooks/\(endpoint.id)", url: "http://169.254.169.254/")
            _ = try await Self.refused(server, "PATCH", "/v1/webhooks/\(endpoint.id)", url: "http://127.0.0.1:9/")
            #expect(try await Self.endpoints(server).map(\.url) == ["http://192.0.2.10/hooks"])
        }
    }

    @Test("with allow-private, loopback is accepted but link-local and metadata addresses still are not")
    func allowPrivate() async throws {
        // Test servers allow private addresses (their receivers listen on 127.0.0.1).
        try await withTestServer { server in
            for url in ["http://127.0.0.1:9/hooks", "http://localhost:9/hooks", "http://10.0.0.1/hooks"] {
                #expect(try await server.rest("POST", "/v1/webhooks", body: #"{"url":"\#(url)"}"#).status == 201, "\(url)")
            }
            for url in [
                "http://169.254.169.254/latest/meta-data", "http://[::ffff:169.254.169.254]/", "http://[fe80::1]/",
                "http://[fd00:ec2::254]/", "http://169.254.170.2/v2/credentials",
            ] {
                _ = try await Self.refused(server, "POST", "/v1/webhooks", url: url)
            }
            #expect(try await Self.endpoints(server).count == 3)
        }
    }

    // MARK: Deliveries

    static func request(_ path: String) -> WebhookRequest {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.add(name: "Host", value: "127.0.0.1")
        head.headers.add(name: "Content-Length", value: "2")
        return WebhookRequest(head: head, body: ByteBuffer(string: "{}"), endsQueueIfRefused: true)
    }

    @Test("a connection that reached a refused address carries no request: the attempt fails with the reason")
    func refusedAtConnect() async throws {
        let endpoint = try await WebhookHTTPTests.Endpoint()
        let origin = try #require(WebhookHTTP.target(of: URL(string: "http://127.0.0.1:\(endpoint.port)/ok")!)).origin
        let strict = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, addressPolicy: Self.strict)
        let answers = await strict.send(
            [[Self.request("/ok"), Self.request("/ok")]], to: origin, parallel: 1, deadline: .now() + .seconds(10)
        )
        #expect(answers.count == 1 && answers[0].count == 1, "the refusal ends the queue: \(answers)")
        guard case .failed(let reason) = answers.first?.first else {
            Issue.record("a refused address answered \(answers)")
            return
        }
        #expect(reason.contains("127.0.0.1 is a loopback address"), "\(reason)")
        await Self.expectNothingWritten(to: endpoint, origin: origin)
        await strict.shutdown()
        await endpoint.stop()
    }

    /// Nothing refused was written to `endpoint`: the first request it gets is one sent now by a client that may reach
    /// loopback.
    static func expectNothingWritten(to endpoint: WebhookHTTPTests.Endpoint, origin: WebhookHTTP.Origin) async {
        let lenient = WebhookHTTP(attemptTimeout: .seconds(5), maxIdlePerOrigin: 4, addressPolicy: Self.lenient)
        let probe = await lenient.send([[Self.request("/busy")]], to: origin, parallel: 1, deadline: .now() + .seconds(10))
        #expect(probe == [[.status(503)]])
        var arrivals = endpoint.arrivals.makeAsyncIterator()
        #expect(await arrivals.next() == "/busy")
        await lenient.shutdown()
    }

    @Test("an endpoint whose address is refused when its delivery connects gets nothing; the delivery log says why")
    func deliveryRefused() async throws {
        let receiver = try await WebhookHTTPTests.Endpoint()
        try await withTestServer(configure: { configuration in
            configuration.webhooks.allowPrivateAddresses = false
            configuration.webhooks.pollInterval = .milliseconds(50)
        }) { server in
            // Stored as it was accepted (say, when its name resolved to a public address): no REST check on the way.
            let id = "whep_rebound"
            try await server.store.createWebhookEndpoint(WebhookEndpoint(
                id: id,
                url: "http://127.0.0.1:\(receiver.port)/ok",
                events: [.messageCreated],
                secret: WebhookSigner.newSecret(),
                createdAt: Timestamp.now()
            ))
            #expect(try await server.rest("POST", "/v1/accounts", body: #"{"accounts":["alice","bob"]}"#).status == 204)
            let send = #"{"from":"alice","clientId":"rebound-1","body":"hi"}"#
            #expect(try await server.rest("POST", "/v1/conversations/d:alice:bob/messages", body: send).status == 200)

            var attempted: Delivery?
            let deadline = ContinuousClock.now + .seconds(60)
            while attempted == nil, ContinuousClock.now < deadline {
                let (status, body) = try await server.restResponse("GET", "/v1/webhooks/\(id)/deliveries")
                #expect(status == 200)
                let deliveries = try JSONDecoder().decode(Deliveries.self, from: body).deliveries
                attempted = deliveries.first { $0.attempts >= 1 && $0.lastError != nil }
                if attempted == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            let delivery = try #require(attempted, "the delivery was attempted")
            #expect(delivery.state != "delivered")
            #expect(delivery.lastError?.contains("127.0.0.1 is a loopback address") == true, "\(delivery)")
        }
        let origin = try #require(WebhookHTTP.target(of: URL(string: "http://127.0.0.1:\(receiver.port)/ok")!)).origin
        await Self.expectNothingWritten(to: receiver, origin: origin)
        await receiver.stop()
    }
}
