// Courier — Apache-2.0
@testable import CourierServerCore
import Testing

/// Whose address a connection is (ADR 0040): from a trusted proxy, the nearest untrusted hop of `X-Forwarded-For`;
/// never what a client writes for itself.
@Suite("Client address behind trusted proxies")
struct ClientAddressTests {
    let proxies = try! TrustedProxies.parse("127.0.0.1/32, 10.0.0.0/8, ::1")

    func client(_ peer: String, _ headers: [(String, String)]) -> String? {
        proxies.client(peer: peer, headers: headers.map { (name: $0.0, value: $0.1) })
    }

    @Test("the nearest untrusted hop is the client; what a client prepends is not believed")
    func walk() {
        #expect(client("127.0.0.1", [("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        #expect(client("127.0.0.1", [("x-forwarded-for", "198.51.100.1, 203.0.113.7, 10.1.2.3")]) == "203.0.113.7")
        // A client that writes the header itself: the proxy appends the real address, which is taken.
        #expect(client("127.0.0.1", [("X-Forwarded-For", "1.2.3.4, 203.0.113.7")]) == "203.0.113.7")
        // Every hop trusted: the leftmost; a hop that is not an address ends the walk at the last trusted one.
        #expect(client("127.0.0.1", [("X-Forwarded-For", "10.0.0.5, 10.0.0.6")]) == "10.0.0.5")
        #expect(client("127.0.0.1", [("X-Forwarded-For", "anything, 10.0.0.6")]) == "10.0.0.6")
        #expect(client("127.0.0.1", []) == "127.0.0.1")
    }

    @Test("Forwarded is not read (a proxy passes it through from the client); an untrusted peer's headers are ignored")
    func spoofing() {
        #expect(client("127.0.0.1", [("Forwarded", "for=198.51.100.9"), ("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        #expect(client("127.0.0.1", [("Forwarded", "for=198.51.100.9")]) == "127.0.0.1")
        #expect(client("203.0.113.50", [("X-Forwarded-For", "198.51.100.9")]) == "203.0.113.50")
    }

    @Test("IPv4 mapped into IPv6 is its IPv4 address; IPv6 ranges; bad entries are named")
    func forms() throws {
        #expect(client("::ffff:127.0.0.1", [("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        #expect(client("::1", [("X-Forwarded-For", "2001:db8::5")]) == "2001:db8::5")
        #expect(client("127.0.0.1", [("X-Forwarded-For", "::ffff:10.0.0.9, 203.0.113.7")]) == "203.0.113.7")
        #expect(throws: TrustedProxies.InvalidEntry(entry: "10.0.0.0/33")) { try TrustedProxies.parse("10.0.0.0/33") }
        #expect(throws: TrustedProxies.InvalidEntry(entry: "nginx")) { try TrustedProxies.parse("127.0.0.1,nginx") }
        #expect(try TrustedProxies.parse("").isEmpty)
    }
}
