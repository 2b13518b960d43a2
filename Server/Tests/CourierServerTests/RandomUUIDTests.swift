// Courier — Apache-2.0
import CourierServer
import Foundation
import Testing

/// Message ids are random UUIDs written as `UUID().uuidString.lowercased()` wrote them before (SPEC: server-assigned,
/// globally unique, opaque); apps that stored them as UUIDs keep parsing them.
@Suite("Random UUIDs for message ids")
struct RandomUUIDTests {
    @Test("a version 4 UUID in lowercase, as Foundation writes one, and no two alike")
    func shape() {
        var seen = Set<String>()
        for _ in 0..<10_000 {
            let text = String.randomUUID()
            let parsed = UUID(uuidString: text)
            #expect(parsed?.uuidString.lowercased() == text, "\(text)")
            let characters = Array(text)
            #expect(characters.count == 36 && characters[14] == "4" && "89ab".contains(characters[19]), "\(text)")
            seen.insert(text)
        }
        #expect(seen.count == 10_000)
    }
}
