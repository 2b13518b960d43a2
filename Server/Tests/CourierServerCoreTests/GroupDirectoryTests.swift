// Courier — Apache-2.0
import CourierWire
import Testing

@testable import CourierServerCore

@Suite("The group member cache")
struct GroupDirectoryTests {
    static func members(_ count: Int, _ prefix: String) -> [AccountID] {
        (0..<count).map { AccountID(rawValue: "\(prefix)\($0)") }
    }

    @Test("it holds at most its bound of member entries, dropping the groups used least recently")
    func bounded() {
        let directory = GroupDirectory(maxAccounts: 1000)
        _ = directory.store(Self.members(400, "a"), for: "g:a", version: Seq(1))
        _ = directory.store(Self.members(400, "b"), for: "g:b", version: Seq(1))
        #expect(directory.cached("g:a", version: Seq(1)) != nil)  // a is now the most recently used
        _ = directory.store(Self.members(400, "c"), for: "g:c", version: Seq(1))
        #expect(directory.cachedAccounts <= 1000)
        #expect(directory.cached("g:b", version: Seq(1)) == nil)
        #expect(directory.cached("g:a", version: Seq(1)) != nil && directory.cached("g:c", version: Seq(1)) != nil)
    }

    @Test("a group larger than the whole cache is served but not kept")
    func oversized() {
        let directory = GroupDirectory(maxAccounts: 100)
        let members = directory.store(Self.members(500, "m"), for: "g:big", version: Seq(1))
        #expect(members.accounts.count == 500)
        #expect(directory.cached("g:big", version: Seq(1)) == nil && directory.cachedAccounts == 0)
    }

    @Test("a list serves only its own membership version, and an older one never replaces a newer one")
    func versions() {
        let directory = GroupDirectory(maxAccounts: 1000)
        _ = directory.store(["alice", "bob", "carol"], for: "g:crew", version: Seq(3))
        #expect(directory.cached("g:crew", version: Seq(4)) == nil)
        _ = directory.store(["alice", "bob"], for: "g:crew", version: Seq(4))
        _ = directory.store(["alice", "bob", "carol"], for: "g:crew", version: Seq(3))
        #expect(directory.cached("g:crew", version: Seq(3)) == nil)
        #expect(directory.cached("g:crew", version: Seq(4))?.accounts == ["alice", "bob"])
        #expect(directory.cachedAccounts == 2)
    }
}
