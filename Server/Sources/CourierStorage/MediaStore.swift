// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// A file stored by Courier (ADR 0032, docs/media.md): it belongs to the conversation it was uploaded into, and only
/// that conversation's members (and the app) fetch it. Its bytes live apart from the database (a folder or a bucket);
/// this row says whose they are.
extension ConversationID {
    /// Where an account's own files are (its avatar, ADR 0053): `account:` and its id, in place of a conversation.
    public static func files(of account: AccountID) -> ConversationID {
        ConversationID(rawValue: "account:" + account.rawValue)
    }

    /// The account whose own files these are (``files(of:)``); `nil` for a conversation.
    public var filesAccount: AccountID? {
        rawValue.hasPrefix("account:") ? AccountID(rawValue: String(rawValue.dropFirst("account:".count))) : nil
    }
}

public struct MediaRecord: Hashable, Sendable {
    /// `md_` and 32 lowercase hex digits (128 random bits): the last component of its address, `/v1/media/{id}`.
    public let id: String
    public let conversation: ConversationID
    /// Who uploaded it; `nil` for the app's backend.
    public let uploader: AccountID?
    public let contentType: String
    public let size: Int64
    /// Lowercase hex of the SHA-256 of its bytes.
    public let sha256: String
    public let createdAt: Timestamp

    public init(
        id: String,
        conversation: ConversationID,
        uploader: AccountID?,
        contentType: String,
        size: Int64,
        sha256: String,
        createdAt: Timestamp
    ) {
        self.id = id
        self.conversation = conversation
        self.uploader = uploader
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.createdAt = createdAt
    }
}

/// Where the rows of stored files live (ADR 0032). A file is *fresh* until the collector finds a message of its
/// conversation that refers to it (then *referred to*) or none past the grace period (then *erased*); a two-way
/// recall or a purge erases the files of what it erases, in its own transaction (``RecallPlan``). The bytes of erased
/// files are deleted after the commit, then their rows.
public protocol MediaStore: Sendable {
    /// Stores a file's row, once its bytes are in place.
    func addMedia(_ record: MediaRecord) async throws(StorageError)
    /// The file `id`, unless there is none or it was erased.
    func media(_ id: String) async throws(StorageError) -> MediaRecord?
    /// Erases file `id` (the app's delete); whether there was one to erase.
    func eraseMedia(_ id: String) async throws(StorageError) -> Bool
    /// Decides for up to `limit` fresh files uploaded before `time`: referred to by a message (or a sender's copy) of
    /// their conversation, or erased.
    func collectMedia(uploadedBefore time: Timestamp, limit: Int) async throws(StorageError) -> MediaCollection
    /// Up to `limit` erased files whose bytes are still to delete.
    func erasedMedia(limit: Int) async throws(StorageError) -> [String]
    /// Forgets erased files whose bytes are deleted.
    func forgetMedia(_ ids: [String]) async throws(StorageError)
}

/// What a pass of the collector decided.
public struct MediaCollection: Hashable, Sendable {
    /// Files decided (referred to or erased): fewer than the limit when none are left to decide.
    public let decided: Int
    public let erased: Int
    public init(decided: Int, erased: Int) {
        self.decided = decided
        self.erased = erased
    }
}
