// Courier — Apache-2.0
import CourierServer
import CourierWire
import Foundation
import Testing

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
