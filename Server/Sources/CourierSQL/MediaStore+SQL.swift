// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

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
            ) OR EXISTS (
                -- An avatar: the group's (uploaded into the group), or its uploader's own (ADRs 0051, 0053).
                SELECT 1 FROM conversation c
                WHERE c.id = media.conversation_id AND coalesce(c.group_avatar, '') LIKE \(unescaped: referred)
            ) OR EXISTS (
                SELECT 1 FROM account a
                WHERE a.id IN (media.uploader, CASE WHEN media.conversation_id LIKE 'account:%' THEN substr(media.conversation_id, 9) END)
                  AND coalesce(a.avatar, '') LIKE \(unescaped: referred)
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
