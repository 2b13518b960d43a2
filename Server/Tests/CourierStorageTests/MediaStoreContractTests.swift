// Courier — Apache-2.0
import CourierStorage
import CourierDomain
import CourierSQL
import CourierTestSupport
import CourierWire
import Testing

/// The rows of stored files on every backend (ADR 0032): what the collector keeps and erases, what a recall erases,
/// and that an erased file is never answered again.
@Suite("Storage contract: media", .timeLimit(.minutes(5)))
struct MediaStoreContractTests {
    static let backends = StorageBackend.available
    let conversation = ConversationID.direct("alice", "bob")

    func file(_ digit: Character, at time: Int64) -> MediaRecord {
        MediaRecord(
            id: "md_" + String(repeating: digit, count: 32), conversation: conversation, uploader: "alice",
            contentType: "image/png", size: 3, sha256: String(repeating: "0", count: 64),
            createdAt: Timestamp(milliseconds: time)
        )
    }

    func message(_ clientID: String, body: String, ext: [String: String]? = nil) -> MessageDraft {
        MessageDraft(
            id: MessageID(rawValue: "m-\(clientID)"), conversation: conversation,
            clientID: ClientMessageID(rawValue: clientID), sender: "alice", time: 10, body: body, ext: ext
        )
    }

    @Test("the collector keeps files a message or a sender's copy refers to, erases the rest past the time, and leaves younger ones", arguments: backends)
    func collector(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account in ["alice", "bob"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let inBody = file("a", at: 100), inExt = file("b", at: 100), alone = file("c", at: 100)
            let inCopy = file("d", at: 100), young = file("e", at: 900), avatar = file("f", at: 100)
            // A file of bob's own that the app uploaded (no uploader), and one nobody names.
            let bobsAvatar = MediaRecord(
                id: "md_" + String(repeating: "7", count: 32), conversation: .files(of: "bob"), uploader: nil,
                contentType: "image/png", size: 3, sha256: String(repeating: "0", count: 64), createdAt: 100
            )
            let bobsOld = MediaRecord(
                id: "md_" + String(repeating: "8", count: 32), conversation: .files(of: "bob"), uploader: "bob",
                contentType: "image/png", size: 3, sha256: String(repeating: "0", count: 64), createdAt: 100
            )
            for record in [inBody, inExt, alone, inCopy, young, avatar, bobsAvatar, bobsOld] { try await store.addMedia(record) }
            // The avatars of its uploader and of the account it belongs to refer to them, and no message does.
            _ = try await store.setAccountProfiles(
                [
                    AccountProfileChange(account: "alice", fields: SetAccountProfileRequest(avatar: "https://chat.example/v1/media/\(avatar.id)")),
                    AccountProfileChange(account: "bob", fields: SetAccountProfileRequest(avatar: "/v1/media/\(bobsAvatar.id)")),
                ],
                at: 10
            )
            _ = try await store.append(message("1", body: "see https://chat.example/v1/media/\(inBody.id)"))
            _ = try await store.append(message("2", body: "pic", ext: ["image": "/v1/media/\(inExt.id)"]))
            // A one-way recall leaves the sender a copy that still refers to its file.
            _ = try await store.append(message("3", body: "mine: /v1/media/\(inCopy.id)"))
            let notice = WireRecallNotice(messageID: "m-3", sender: "alice", recalledBy: "alice", mode: .oneWay)
            _ = try await store.recall(
                MessageDraft(id: "r-3", conversation: conversation, clientID: "recall:m-3", sender: "alice", time: 11, body: "", recall: notice),
                rules: RecallPlan.Rules(byApp: false, window: nil, managerWindow: nil)
            )

            #expect(
                try await store.collectMedia(uploadedBefore: Timestamp(milliseconds: 500), limit: 100)
                    == MediaCollection(decided: 7, erased: 2)
            )
            #expect(try await store.erasedMedia(limit: 10).sorted() == [bobsOld.id, alone.id].sorted())
            #expect(try await store.media(alone.id) == nil)
            for kept in [inBody, inExt, inCopy, young, avatar, bobsAvatar] { #expect(try await store.media(kept.id) == kept) }
            // Decided once: a second pass erases nothing more.
            #expect(
                try await store.collectMedia(uploadedBefore: Timestamp(milliseconds: 500), limit: 100)
                    == MediaCollection(decided: 0, erased: 0)
            )
            try await store.forgetMedia([alone.id, bobsOld.id])
            #expect(try await store.erasedMedia(limit: 10).isEmpty)
        }
    }

    @Test("a two-way recall erases the files its message refers to that its sender uploaded, in its own transaction, not another's; the app erases one by id", arguments: backends)
    func recallErases(backend: StorageBackend) async throws {
        try await backend.withStore { store in
            for account in ["alice", "bob"] as [AccountID] { try await store.registerAccount(account, at: 0) }
            let first = file("1", at: 1), second = file("2", at: 1), other = file("3", at: 1)
            let bobs = MediaRecord(
                id: "md_" + String(repeating: "4", count: 32), conversation: conversation, uploader: "bob",
                contentType: "image/png", size: 3, sha256: String(repeating: "0", count: 64), createdAt: 1
            )
            for record in [first, second, other, bobs] { try await store.addMedia(record) }
            _ = try await store.append(
                message("1", body: "two: /v1/media/\(first.id) and /v1/media/\(second.id), and bob's /v1/media/\(bobs.id)")
            )
            let notice = WireRecallNotice(messageID: "m-1", sender: "alice", recalledBy: "alice", mode: .twoWay)
            _ = try await store.recall(
                MessageDraft(id: "r-1", conversation: conversation, clientID: "recall:m-1", sender: "alice", time: 11, body: "", recall: notice),
                rules: RecallPlan.Rules(byApp: false, window: nil, managerWindow: nil)
            )
            #expect(try await store.erasedMedia(limit: 10) == [first.id, second.id])
            #expect(try await store.media(first.id) == nil)
            #expect(try await store.media(second.id) == nil)
            #expect(try await store.media(other.id) == other)
            #expect(try await store.media(bobs.id) == bobs)
            #expect(try await store.eraseMedia(other.id))
            #expect(try await !store.eraseMedia(other.id))
            #expect(try await store.erasedMedia(limit: 10) == [first.id, second.id, other.id])
        }
    }
}
