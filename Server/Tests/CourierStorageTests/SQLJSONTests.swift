// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import Foundation
import Testing

/// The lists a statement reads with `json_each` (`SQLJSON.stringList`): JSON that a JSON parser reads back as the same
/// strings, quotes, backslashes and every script included; control characters, which no id holds, dropped.
@Suite("SQL JSON lists")
struct SQLJSONTests {
    @Test("a list of awkward strings reads back as the same strings")
    func stringList() throws {
        let strings = ["a", "q\"uote", "back\\slash", "é 世界 😀", "ctl\u{01}x", "", "\u{7F}del"]
        let text = SQLJSON.stringList(strings)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String])
        #expect(parsed == ["a", "q\"uote", "back\\slash", "é 世界 😀", "ctlx", "", "\u{7F}del"])
        #expect(SQLJSON.stringList([]) == "[]")
    }
}
