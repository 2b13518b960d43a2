// Courier — Apache-2.0
internal import CourierDomain
internal import CourierStorage
internal import CourierWire

/// The statements of a read (``MarkReadProcedure``), in the SQL both dialects share.
extension MarkReadProcedure {
    /// A read's statements on its hot path — a direct or a group read's first statement, the kept count moved, the
    /// row's update (counting afresh, in full, or not), a watermark's time — as samples: their text does not depend on the values they bind,
    /// so a backend that prepares statements (PostgreSQL) prepares these once per connection.
    public static var hotStatements: [SQLQuery] {
        func sample(_ conversation: ConversationID) -> MarkReadProcedure {
            MarkReadProcedure([
                ResolvedRead(reader: "a", conversation: conversation, target: .upTo(.zero), isShared: true, time: .zero)
            ])
        }
        let (direct, group) = (sample(.direct("a", "b")), sample(.group("g")))
        let none = Watermark(seq: .zero, time: .zero)
        let stored = Stored(
            last: .zero, own: none, shared: none, delivered: none, kept: nil, fresh: true, hasAcks: false,
            hasDeletions: false, cleared: .zero, namedTime: nil
        )
        let book = ReaderBook(ownWatermark: .zero, sharedWatermark: .zero, acks: [])
        return [
            direct.positionsQuery, group.positionsQuery,
            direct.countQuery(.moving(KeptUnread(from: .zero, to: .zero, count: 0), floor: .zero), book, stored),
            direct.writeQuery(.advance, book, stored),
            direct.counting(.fresh(floor: .zero)).writeQuery(.advance, book, stored),
            direct.counting(.full).writeQuery(.advance, book, stored),
            direct.timeQuery(.zero),
        ]
    }

    /// This read with its update counting as `count` says (a sample of ``hotStatements``).
    func counting(_ count: Count) -> MarkReadProcedure {
        var read = self
        read.countedByAdvance = count
        return read
    }

    /// An empty receipt row for the reader (`RETURNING 1` when this made it).
    var createQuery: SQLQuery {
        """
        INSERT INTO receipt (conversation_id, account) VALUES (\(conversation), \(reader))
        ON CONFLICT (conversation_id, account) DO NOTHING RETURNING 1
        """
    }

    /// The reader's one-by-one reads above its watermarks, with the time each was first made.
    var acksQuery: SQLQuery {
        "SELECT seq, shared, time FROM read_ack WHERE conversation_id = \(conversation) AND account = \(reader)"
    }

    func timeQuery(_ seq: Seq) -> SQLQuery {
        "SELECT time FROM message WHERE conversation_id = \(conversation) AND seq = \(seq.rawValue)"
    }

    /// The reader's positions, kept count and the facts a read needs, its row locked where rows are locked; no row
    /// when the reader has none. `$last` and the facts are the statement's snapshot.
    var positionsQuery: SQLQuery {
        let named: Int64 =
            switch targets.last ?? read.target {
            case .upTo(let seq): seq.rawValue
            case .all: -1
            case .seqs, .upToTime: 0
            }
        return """
            SELECT c.last_seq, r.own_read_seq, r.own_read_time, r.read_seq, r.read_time, r.delivered_seq,
                r.delivered_time, r.unread_from, r.unread_to, r.unread_count,
                r.stamp = (SELECT s.stamp FROM receipt s WHERE s.conversation_id = c.id AND s.account = r.account),
                EXISTS (SELECT 1 FROM read_ack a WHERE a.conversation_id = c.id AND a.account = r.account),
                EXISTS (SELECT 1 FROM deleted_message d WHERE d.conversation_id = c.id AND d.account = r.account),
                coalesce((SELECT v.cleared_seq FROM conversation_view v
                    WHERE v.conversation_id = c.id AND v.account = r.account), 0),
                (SELECT m.time FROM message m WHERE m.conversation_id = c.id
                    AND m.seq = CASE WHEN \(named) < 0 THEN c.last_seq ELSE \(named) END),
                \(isGroup ? memberExpression : "TRUE"),
                CASE WHEN \(named) < 0 THEN c.last_seq ELSE \(named) END
            FROM conversation c JOIN receipt r ON r.conversation_id = c.id AND r.account = \(reader)
            WHERE c.id = \(conversation) \(lockRowsOf: "r")
            """
    }

    /// The conversation's newest seq and, in a group, whether the reader is a member.
    var headQuery: SQLQuery {
        "SELECT c.last_seq, \(isGroup ? memberExpression : "TRUE") FROM conversation c WHERE c.id = \(conversation)"
    }

    private var memberExpression: SQLQuery {
        "EXISTS (SELECT 1 FROM conversation_member cm WHERE cm.conversation_id = c.id AND cm.account = \(reader))"
    }

    /// The first seqs of `probe`'s range that count as unread for the reader (``ReadPosition/compact(countable:)``);
    /// the own position also steps over what the reader deleted or cleared for itself (`view`), the shared one does
    /// not — what peers see never tells them of an account's own view (ADR 0029).
    func probeQuery(_ probe: (range: ClosedRange<Seq>, limit: Int), view: Bool) -> SQLQuery {
        var query: SQLQuery = """
            SELECT m.seq FROM message m
            WHERE m.conversation_id = \(conversation) AND m.seq BETWEEN \(probe.range.lowerBound.rawValue)
                AND \(probe.range.upperBound.rawValue) AND m.sender <> \(reader) AND m.counts_unread
            """
        if view, let stored {
            query += """

                    AND m.seq > \(stored.cleared.rawValue) AND NOT EXISTS (SELECT 1 FROM deleted_message d
                        WHERE d.conversation_id = m.conversation_id AND d.account = \(reader) AND d.seq = m.seq)
                """
        }
        return query + " ORDER BY m.seq LIMIT \(probe.limit)"
    }

    /// The reader's unread count after the read: the entries of others that count as unread above its own position
    /// and what it cleared, up to the newest entry the read saw, less what it read one by one or deleted for itself.
    func countQuery(_ count: Count, _ book: ReaderBook, _ stored: Stored) -> SQLQuery {
        let others: SQLQuery = "m.sender <> \(reader) AND m.counts_unread"
        switch count {
        case .moving(let kept, let floor):
            // Three ranges of the index (an OR of the two ranges in one scan reads the whole conversation on SQLite).
            // A recall notice is looked for past `last` too: on PostgreSQL this statement's snapshot is newer than
            // the one `last` was read in, and a recall committed in between has already made its entry stop counting.
            let read: SQLQuery = "m.seq > \(kept.from.rawValue) AND m.seq <= \(floor.rawValue)"
            let arrived: SQLQuery = "m.seq > \(kept.to.rawValue) AND m.seq <= \(stored.last.rawValue)"
            return """
                SELECT (SELECT count(*) FROM message m WHERE m.conversation_id = \(conversation) AND \(read) AND \(others)),
                    (SELECT count(*) FROM message m WHERE m.conversation_id = \(conversation) AND \(arrived) AND \(others)),
                    EXISTS (SELECT 1 FROM message m
                        WHERE m.conversation_id = \(conversation) AND m.seq > \(kept.to.rawValue) AND m.recall IS NOT NULL)
                """
        case .fresh(let floor):
            return """
                SELECT count(*) FROM message m
                WHERE m.conversation_id = \(conversation) AND m.seq > \(floor.rawValue)
                    AND m.seq <= \(stored.last.rawValue) AND \(others)
                """
        case .full:
            var query: SQLQuery = """
                SELECT count(*) FROM message m
                WHERE m.conversation_id = \(conversation)
                    AND m.seq > \(max(book.own.watermark, stored.cleared).rawValue)
                    AND m.seq <= \(stored.last.rawValue) AND \(others)
                    AND m.seq NOT IN \(list: book.own.readSeqs.map(\.rawValue))
                """
            if stored.hasDeletions {
                query += """

                        AND NOT EXISTS (SELECT 1 FROM deleted_message d
                            WHERE d.conversation_id = m.conversation_id AND d.account = \(reader) AND d.seq = m.seq)
                    """
            }
            return query
        }
    }

    func writeQuery(_ write: Asked, _ book: ReaderBook, _ stored: Stored) -> SQLQuery {
        let row: SQLQuery = "WHERE conversation_id = \(conversation) AND account = \(reader)"
        switch write {
        case .advance:
            // Read implies delivered: a shared read also moves the delivery watermark. Every column only moves
            // forward, whatever is already stored.
            let (shared, own) = (book.shared.watermark.rawValue, book.own.watermark.rawValue)
            let (sharedTime, ownTime) = (time(of: book.shared.watermark, stored), time(of: book.own.watermark, stored))
            let now = read.time.rawValue
            let kept = unread?.kept
            var counting: (kept: SQLQuery, returning: SQLQuery) = (
                """
                unread_from = coalesce(\(kept?.from.rawValue), unread_from),
                    unread_to = coalesce(\(kept?.to.rawValue), unread_to),
                    unread_count = coalesce(\(kept?.count), unread_count)
                """,
                ""
            )
            switch countedByAdvance {
            case .fresh(let floor):
                counting = (
                    """
                    unread_from = \(floor.rawValue), unread_to = \(stored.last.rawValue),
                        unread_count = (\(countQuery(.fresh(floor: floor), book, stored)))
                    """,
                    " RETURNING unread_count"
                )
            case .full:
                counting.returning = " RETURNING (\(countQuery(.full, book, stored)))"
            case .moving, nil:
                break
            }
            return """
                UPDATE receipt SET
                    delivered_time = CASE WHEN \(shared) > delivered_seq THEN \(sharedTime) ELSE delivered_time END,
                    delivered_at = CASE WHEN \(shared) > delivered_seq THEN \(now) ELSE delivered_at END,
                    delivered_seq = CASE WHEN \(shared) > delivered_seq THEN \(shared) ELSE delivered_seq END,
                    read_time = CASE WHEN \(shared) > read_seq THEN \(sharedTime) ELSE read_time END,
                    read_at = CASE WHEN \(shared) > read_seq THEN \(now) ELSE read_at END,
                    read_seq = CASE WHEN \(shared) > read_seq THEN \(shared) ELSE read_seq END,
                    own_read_time = CASE WHEN \(own) > own_read_seq THEN \(ownTime) ELSE own_read_time END,
                    own_read_seq = CASE WHEN \(own) > own_read_seq THEN \(own) ELSE own_read_seq END,
                    \(counting.kept),
                    stamp = change_stamp()
                \(row)\(counting.returning)
                """
        case .keep:
            let kept = unread?.kept
            return """
                UPDATE receipt SET unread_from = \(kept?.from.rawValue), unread_to = \(kept?.to.rawValue),
                    unread_count = \(kept?.count)
                \(row)
                """
        case .dropAcks:
            return "DELETE FROM read_ack \(row)"
        case .insertAcks:
            // An ack keeps the time it was first made.
            let times = [Seq: Int64]((acks ?? []).map { ($0.seq, $0.time) }, uniquingKeysWith: { first, _ in first })
            var query: SQLQuery = "INSERT INTO read_ack (conversation_id, account, seq, shared, time) VALUES "
            for (index, ack) in book.readAcks.enumerated() {
                if index > 0 { query += ", " }
                query += """
                    (\(conversation), \(reader), \(ack.seq.rawValue), \(ack.shared), \
                    \(times[ack.seq, default: read.time.rawValue]))
                    """
            }
            return query
        case .dropRow:
            // A read that changed nothing leaves no row behind: peers would see a position at 0.
            return "DELETE FROM receipt \(row)"
        default:
            preconditionFailure("not a write")
        }
    }
}
