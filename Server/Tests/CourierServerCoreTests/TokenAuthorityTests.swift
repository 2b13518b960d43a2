// Courier — Apache-2.0
import CourierWire
import Foundation
import JWTKit
import Testing

@testable import CourierServerCore

@Suite("Client tokens")
struct TokenAuthorityTests {
    @Test("a minted token is a JWT with HS256, sub = account and an exp claim")
    func tokenShape() async throws {
        let authority = await TokenAuthority(secret: try AppSecret(String(repeating: "k", count: 32)))
        let token = try await authority.token(for: "alice", lifetime: .seconds(60))
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        let header = try #require(Self.decodeSegment(parts[0]))
        let claims = try #require(Self.decodeSegment(parts[1]))
        #expect(header["alg"] as? String == "HS256")
        #expect(claims["sub"] as? String == "alice")
        let exp = try #require(claims["exp"] as? Double)
        #expect(abs(exp - Date().timeIntervalSince1970 - 60) < 5)
    }

    static func decodeSegment(_ segment: Substring) -> [String: Any]? {
        var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

/// RFC 8725 checks on tokens crafted as an attacker or a careless backend would: the signature is always right (made
/// with the app secret), everything else varies.
@Suite("Token verification (RFC 8725)")
struct TokenVerificationTests {
    static let secret = String(repeating: "k", count: 32)

    /// A token signed with HS256 and the app secret, whatever its header says.
    static func craft(header: JWTHeader = JWTHeader(), claims: CraftedClaims) async throws -> String {
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(claims, header: header)
    }

    static func authority(maxLifetime: Duration? = nil) async throws -> TokenAuthority {
        await TokenAuthority(secret: try AppSecret(secret), leeway: .seconds(60), maxLifetime: maxLifetime)
    }

    static func verify(_ token: String, maxLifetime: Duration? = nil) async throws -> String? {
        let authority = try await authority(maxLifetime: maxLifetime)
        do throws(RequestError) {
            return try await authority.verify(token).account.rawValue
        } catch {
            #expect(error.code == .authInvalidToken)
            return nil
        }
    }

    static let now = Date().timeIntervalSince1970

    @Test(
        "a header naming another algorithm than HS256 is refused although the signature is HS256",
        arguments: ["none", "HS384", "HS512", "RS256", "ES256", "hs256"]
    )
    func foreignAlgorithm(alg: String) async throws {
        let token = try await Self.craft(header: ["alg": .string(alg)], claims: .init(sub: "alice", exp: Self.now + 600))
        #expect(try await Self.verify(token) == nil)
    }

    @Test("a crit header is refused: the server understands no extension")
    func critical() async throws {
        let token = try await Self.craft(
            header: ["crit": .array([.string("exp")])],
            claims: .init(sub: "alice", exp: Self.now + 600)
        )
        #expect(try await Self.verify(token) == nil)
    }

    @Test("nbf is honoured with the leeway")
    func notBefore() async throws {
        let early = try await Self.craft(claims: .init(sub: "alice", exp: Self.now + 600, nbf: Self.now + 300))
        #expect(try await Self.verify(early) == nil)
        let withinLeeway = try await Self.craft(claims: .init(sub: "alice", exp: Self.now + 600, nbf: Self.now + 30))
        #expect(try await Self.verify(withinLeeway) == "alice")
    }

    @Test("exp is required, checked with the leeway, and bounded by the maximum lifetime when one is set")
    func expiry() async throws {
        let expired = try await Self.craft(claims: .init(sub: "alice", exp: Self.now - 120))
        #expect(try await Self.verify(expired) == nil)
        let justExpired = try await Self.craft(claims: .init(sub: "alice", exp: Self.now - 10))
        #expect(try await Self.verify(justExpired) == "alice")
        let missing = try await Self.craft(claims: .init(sub: "alice", exp: nil))
        #expect(try await Self.verify(missing) == nil)
        let longLived = try await Self.craft(claims: .init(sub: "alice", exp: Self.now + 86_400 * 365, iat: Self.now))
        #expect(try await Self.verify(longLived) == "alice")
        #expect(try await Self.verify(longLived, maxLifetime: .seconds(86_400)) == nil)
        let noIssuedAt = try await Self.craft(claims: .init(sub: "alice", exp: Self.now + 86_400 * 365))
        #expect(try await Self.verify(noIssuedAt, maxLifetime: .seconds(86_400)) == nil)
        let future = try await Self.craft(claims: .init(sub: "alice", exp: Self.now + 600, iat: Self.now + 300))
        #expect(try await Self.verify(future) == nil)
    }

    @Test("a token signed with another secret is refused")
    func otherSecret() async throws {
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: String(repeating: "z", count: 32)), digestAlgorithm: .sha256)
        let token = try await keys.sign(CraftedClaims(sub: "alice", exp: Self.now + 600))
        #expect(try await Self.verify(token) == nil)
    }
}

/// Claims as any JWT library would write them (numeric dates), some optional.
struct CraftedClaims: JWTPayload {
    var sub: String
    var exp: Double?
    var iat: Double?
    var nbf: Double?
    init(sub: String, exp: Double?, iat: Double? = nil, nbf: Double? = nil) {
        self.sub = sub
        self.exp = exp
        self.iat = iat
        self.nbf = nbf
    }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

@Suite("Failed connects per address")
struct ConnectThrottleTests {
    @Test("an address is throttled after its limit of failures in a minute, and free again after it")
    func throttle() {
        let clock = ManualTime()
        let throttle = ConnectThrottle(limitPerMinute: 3, now: { clock.now })
        for _ in 0..<3 {
            #expect(!throttle.isThrottled("10.0.0.1"))
            throttle.recordFailure("10.0.0.1")
        }
        #expect(throttle.isThrottled("10.0.0.1"))
        #expect(!throttle.isThrottled("10.0.0.2"), "other addresses are not affected")
        clock.advance(by: 121)
        #expect(!throttle.isThrottled("10.0.0.1"))
    }

    @Test("tracked addresses are bounded")
    func bounded() {
        let throttle = ConnectThrottle(limitPerMinute: 3, maxAddresses: 100)
        for index in 0..<1000 { throttle.recordFailure("10.0.\(index / 256).\(index % 256)") }
        #expect(throttle.trackedAddresses <= 100)
    }
}

/// A settable wall clock.
final class ManualTime: @unchecked Sendable {
    // @unchecked: a test sets it between calls on one task.
    var now = Date(timeIntervalSince1970: 1_800_000_000)
    func advance(by seconds: TimeInterval) { now = now.addingTimeInterval(seconds) }
}
