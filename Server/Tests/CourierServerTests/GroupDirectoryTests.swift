// Courier — Apache-2.0
import CourierWire
import Testing

@testable import CourierServer

@Suite("The group member cache")
struct GroupDirectoryTests {
    static func members(_ count: Int, _ prefix: String) -> [AccountID] {
        (0..<count).map { AccountID(rawValue: "\(prefix)\($0)") }
    }

    @Test("it holds at most its bound of member entries, dropping the groups used least recently")
    func bounded() {
        let directory = GroupDirectory(maxAccounts: 1000)
        _ = directory.store(Self.members(400, "a"), for: "g:a", loadedAt: directory.generation)
        _ = directory.store(Self.members(400, "b"), for: "g:b", loadedAt: directory.generation)
        #expect(directory.cached("g:a") != nil)  // a is now the most recently used
        _ = directory.store(Self.members(400, "c"), for: "g:c", loadedAt: directory.generation)
        #expect(directory.cachedAccounts <= 1000)
        #expect(directory.cached("g:b") == nil)
        #expect(directory.cached("g:a") != nil && directory.cached("g:c") != nil)
    }

    @Test("a group larger than the whole cache is served but not kept")
    func oversized() {
        let directory = GroupDirectory(maxAccounts: 100)
        let members = directory.store(Self.members(500, "m"), for: "g:big", loadedAt: directory.generation)
        #expect(members.accounts.count == 500)
        #expect(directory.cached("g:big") == nil && directory.cachedAccounts == 0)
    }
}
