// Courier — Apache-2.0
public import CourierWire

/// A file stored by Courier (ADR 0032, docs/media.md): it belongs to the conversation it was uploaded into, and only
/// that conversation's members (and the app) fetch it. Its bytes live apart from the database (a folder or a bucket);
/// this row says whose they are.
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

/// The files a message refers to: the ids in the media addresses (`…/v1/media/md_…`, slashes escaped or not) its
/// body or `ext` carries.
/// Written once for the recall that erases them and the collector that keeps them.
public enum MediaReference {
    static let marker = Array("/v1/media/md_".utf8)
    static let hexDigits = 32

    /// The ids of the files `texts` refer to, each once, in order of appearance.
    public static func ids(in texts: [String?]) -> [String] {
        var ids: [String] = []
        for text in texts {
            guard let text else { continue }
            // JSON may escape the slashes (`ext` as some encoders write it).
            var bytes: [UInt8] = []
            for byte in text.utf8 {
                if byte == UInt8(ascii: "/"), bytes.last == UInt8(ascii: "\\") { bytes.removeLast() }
                bytes.append(byte)
            }
            var index = 0
            while index + marker.count + hexDigits <= bytes.count {
                guard bytes[index..<index + marker.count].elementsEqual(marker) else {
                    index += 1
                    continue
                }
                let start = index + marker.count
                let digits = bytes[start..<start + hexDigits]
                if digits.allSatisfy(isHex), start + hexDigits == bytes.count || !isHex(bytes[start + hexDigits]) {
                    let id = "md_" + String(decoding: digits, as: UTF8.self)
                    if !ids.contains(id) { ids.append(id) }
                }
                index = start
            }
        }
        return ids
    }

    /// Whether `id` has the shape of a file's id.
    public static func isValid(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return bytes.count == 3 + hexDigits && id.hasPrefix("md_") && bytes.dropFirst(3).allSatisfy(isHex)
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
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

/// A file's state in `media.state`.
enum MediaState {
    static let fresh: Int64 = 0
    static let referred: Int64 = 1
    static let erased: Int64 = 2
}

/// Written once for every backend that runs ``SQLQuery``s.
extension MediaStore where Self: SQLRunner {
    public func addMedia(_ record: MediaRecord) async throws(StorageError) {
        _ = try await writeRows(
            """
            INSERT INTO media (id, conversation_id, uploader, content_type, size, sha256, created_at, state)
            VALUES (\(record.id), \(record.conversation.rawValue), \(record.uploader?.rawValue), \(record.contentType),
                    \(record.size), \(record.sha256), \(record.createdAt.rawValue), \(MediaState.fresh))
            """
        )
    }

    public func media(_ id: String) async throws(StorageError) -> MediaRecord? {
        guard
            let row = try await readRows(
                """
                SELECT id, conversation_id, uploader, content_type, size, sha256, created_at FROM media
                WHERE id = \(id) AND state <> \(MediaState.erased)
                """
            ).first
        else { return nil }
        return MediaRecord(
            id: try row.string(0),
            conversation: ConversationID(rawValue: try row.string(1)),
            uploader: try row.optionalString(2).map(AccountID.init(rawValue:)),
            contentType: try row.string(3),
            size: try row.int64(4),
            sha256: try row.string(5),
            createdAt: Timestamp(milliseconds: try row.int64(6))
        )
    }

    public func eraseMedia(_ id: String) async throws(StorageError) -> Bool {
        !(try await writeRows(
            """
            UPDATE media SET state = \(MediaState.erased) WHERE id = \(id) AND state <> \(MediaState.erased)
            RETURNING id
            """
        ).isEmpty)
    }

    public func collectMedia(
        uploadedBefore time: Timestamp,
        limit: Int
    ) async throws(StorageError) -> MediaCollection {
        // One statement: what decides and what is written are one snapshot; a row a recall erased meanwhile stays
        // erased (the outer `state` check, which PostgreSQL evaluates again on the row it locks). A message's time is
        // not compared with the upload's: imported history refers to files uploaded after the messages' own times.
        // The id alone is looked for (an address may be written with escaped slashes): keeping a file is the safe
        // side of a doubt.
        let referred = "('%' || media.id || '%')"
        let rows = try await writeRows(
            """
            UPDATE media SET state = CASE WHEN EXISTS (
                SELECT 1 FROM message m WHERE m.conversation_id = media.conversation_id AND (
                    m.body LIKE \(unescaped: referred) OR coalesce(m.ext, '') LIKE \(unescaped: referred)
                    OR EXISTS (
                        SELECT 1 FROM sender_copy s WHERE s.message_id = m.id
                        AND (s.body LIKE \(unescaped: referred) OR coalesce(s.ext, '') LIKE \(unescaped: referred))
                    )
                )
            ) THEN \(MediaState.referred) ELSE \(MediaState.erased) END
            WHERE state = \(MediaState.fresh) AND id IN (
                SELECT id FROM media WHERE state = \(MediaState.fresh) AND created_at < \(time.rawValue)
                ORDER BY created_at LIMIT \(limit)
            )
            RETURNING state
            """
        )
        var erased = 0
        for row in rows where try row.int64(0) == MediaState.erased { erased += 1 }
        return MediaCollection(decided: rows.count, erased: erased)
    }

    public func erasedMedia(limit: Int) async throws(StorageError) -> [String] {
        var ids: [String] = []
        for row in try await readRows(
            "SELECT id FROM media WHERE state = \(MediaState.erased) ORDER BY id LIMIT \(limit)"
        ) {
            ids.append(try row.string(0))
        }
        return ids
    }

    public func forgetMedia(_ ids: [String]) async throws(StorageError) {
        guard !ids.isEmpty else { return }
        _ = try await writeRows("DELETE FROM media WHERE id IN \(list: ids) AND state = \(MediaState.erased)")
    }
}
