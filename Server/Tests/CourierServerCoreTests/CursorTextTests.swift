// Courier — Apache-2.0
import CourierStorage
import CourierWire
import Testing

@testable import CourierServerCore

@Suite("Cursors a server hands out")
struct CursorTextTests {
    @Test("a sync's since and a profile cursor read back as they were handed out, ids with dots included")
    func roundTrip() throws {
        let complete = SyncToken(storeID: "db1", next: 42, changesSince: nil, position: nil)
        let resumed = try #require(SyncToken(complete.text))
        #expect(resumed.storeID == "db1" && resumed.next == 42 && resumed.changesSince == nil && resumed.position == nil)

        let conversation = ConversationID(rawValue: "g:a.b.c")
        let paging = SyncToken(storeID: "db1", next: 42, changesSince: 7, position: (conversation, Seq(9)))
        let page = try #require(SyncToken(paging.text))
        #expect(page.changesSince == 7 && page.position?.conversation.rawValue == "g:a.b.c" && page.position?.seq == Seq(9))

        let profiles = ProfileCursor(
            storeID: "db1",
            from: 3,
            until: 11,
            position: ProfilePosition(stamp: 5, account: AccountID(rawValue: "ann.e"))
        )
        #expect(ProfileCursor(profiles.text) == profiles)
        #expect(ProfileCursor("p1.db1.3") == ProfileCursor(storeID: "db1", from: 3, until: 3, position: nil))
    }

    @Test("a cursor of the other kind, another version, a missing or negative stamp, or a part missing is refused")
    func refused() {
        for text in ["", "garbage", "p1.db1.3", "v2.db1.3", "v1..3", "v1.db1.-1", "v1.db1.x", "v1.db1.3.4",
            "v1.db1.3.4.5", "v1.db1.3.9.1.d:a:b", "v1.db1.3.-.1.", "v1.db1.3.-.-1.d:a:b"]
        {
            #expect(SyncToken(text) == nil, "\(text)")
        }
        for text in ["v1.db1.3", "p2.db1.3", "p1..3", "p1.db1.-3", "p1.db1.3.x.5.ann", "p1.db1.3.4.5."] {
            #expect(ProfileCursor(text) == nil, "\(text)")
        }
    }
}
