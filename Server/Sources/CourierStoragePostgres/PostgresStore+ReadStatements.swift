// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
internal import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    /// A conversation's last seq; in a group, holding its row shared (no join, leave, append or late ask is half done
    /// meanwhile).
    func lastSeq(
        of conversation: ConversationID,
        holdingGroup: Bool,
        on connection: PostgresConnection
    ) async throws -> Int64? {
        let bindings = try PostgresBindings.of(conversation.rawValue)
        let row =
            holdingGroup
            ? try await connection.run(LastSeqHoldingGroup.self, bindings, logger: logger).first
            : try await connection.run(LastSeq.self, bindings, logger: logger).first
        return try row?.decode(Int64.self)
    }

    /// A transaction-scoped advisory lock on a group's reads (class 7460212, the group id's hash).
    enum LockGroupReads: HotStatement {
        static let sql = "SELECT pg_advisory_xact_lock(7460212, hashtext($1))::text"
    }

    enum LastSeq: HotStatement {
        static let sql = "SELECT last_seq FROM conversation WHERE id = $1"
    }

    enum LastSeqHoldingGroup: HotStatement {
        static let sql = LastSeq.sql + " FOR SHARE"
    }

    /// A reader's receipt row, created empty if it has none (`RETURNING 1` when it was created).
    enum CreateReceipt: HotStatement {
        static let sql = """
            INSERT INTO receipt (conversation_id, account) VALUES ($1, $2)
            ON CONFLICT (conversation_id, account) DO NOTHING RETURNING 1
            """
    }

    /// A reader's positions, its row locked until commit: its reads are serialized across nodes.
    enum LockPositions: HotStatement {
        static let sql = """
            SELECT own_read_seq, own_read_time, read_seq, read_time, delivered_seq, delivered_time
            FROM receipt WHERE conversation_id = $1 AND account = $2 FOR UPDATE
            """
    }

    /// A direct chat's last seq with a reader's positions, its receipt row locked (``LockPositions``); no row when
    /// the reader has none yet. The last seq is the statement's snapshot: every entry committed before the read
    /// began.
    ///
    /// With them, in the same statement: whether the row is still the version of the statement's snapshot (it is
    /// unless another read of this reader committed while this one waited for the lock), the reader's acks as that
    /// snapshot has them — current only then, since only a read that updates the row writes acks — and the time of
    /// the entry at `$3` (`-1`: the last one).
    enum LockReaderInDirect: HotStatement {
        static let sql = """
            SELECT c.last_seq, r.own_read_seq, r.own_read_time, r.read_seq, r.read_time, r.delivered_seq,
                r.delivered_time,
                r.stamp = (SELECT s.stamp FROM receipt s WHERE s.conversation_id = $1 AND s.account = $2),
                ARRAY(SELECT a.seq FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                ARRAY(SELECT a.shared FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                ARRAY(SELECT a.time FROM read_ack a WHERE a.conversation_id = $1 AND a.account = $2 ORDER BY a.seq),
                (SELECT m.time FROM message m
                 WHERE m.conversation_id = c.id AND m.seq = CASE WHEN $3 < 0 THEN c.last_seq ELSE $3 END)
            FROM conversation c JOIN receipt r ON r.conversation_id = c.id AND r.account = $2
            WHERE c.id = $1 FOR UPDATE OF r
            """
    }

    /// A reader's single-message reads past its watermarks.
    enum ReadAcks: HotStatement {
        static let sql = "SELECT seq, shared, time FROM read_ack WHERE conversation_id = $1 AND account = $2"
    }

    /// Moves a reader's positions forward (`$3`/`$4` shared seq and time, `$5` when, `$6`/`$7` own seq and time):
    /// read implies delivered; every column only moves forward.
    enum AdvanceRead: HotStatement {
        static let sql = """
            UPDATE receipt SET
                delivered_time = CASE WHEN $3 > delivered_seq THEN $4 ELSE delivered_time END,
                delivered_seq = GREATEST(delivered_seq, $3),
                read_time = CASE WHEN $3 > read_seq THEN $4 ELSE read_time END,
                read_at = CASE WHEN $3 > read_seq THEN $5 ELSE read_at END,
                delivered_at = CASE WHEN $3 > delivered_seq THEN $5 ELSE delivered_at END,
                read_seq = GREATEST(read_seq, $3),
                own_read_time = CASE WHEN $6 > own_read_seq THEN $7 ELSE own_read_time END,
                own_read_seq = GREATEST(own_read_seq, $6),
                stamp = change_stamp()
            WHERE conversation_id = $1 AND account = $2
            """
    }

    /// ``AdvanceRead`` returning the reader's unread count afterwards in a direct chat: the other's entries that
    /// count as unread past the new own position (`$6`), but for the acks the reader keeps (`$8`) and what it cleared
    /// or deleted for itself (ADR 0029).
    enum AdvanceReadCounting: HotStatement {
        static let sql = AdvanceRead.sql + """

            RETURNING (SELECT count(*) FROM message m
                WHERE m.conversation_id = $1 AND m.seq > $6 AND m.sender <> $2 AND m.counts_unread
                    AND NOT (m.seq = ANY($8::int8[]))
                    AND m.seq > coalesce((SELECT cleared_seq FROM conversation_view
                        WHERE conversation_id = $1 AND account = $2), 0)
                    AND NOT EXISTS (SELECT 1 FROM deleted_message d
                        WHERE d.conversation_id = $1 AND d.account = $2 AND d.seq = m.seq))
            """
    }

    enum MessageTime: HotStatement {
        static let sql = "SELECT time FROM message WHERE conversation_id = $1 AND seq = $2"
    }
}
