// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
public import CourierWire

/// The per-message read counts of groups (docs/decisions/0008), written once for every backend: one
/// `receipt_count` row per message asking for receipts, whatever the group's size.
extension ReceiptTally {
    /// The count of a message that now asks for receipts, with its audience and the readers it already has.
    public static func insert(_ message: WireMessage, audience: Int, readCount: Int) -> SQLQuery {
        """
        INSERT INTO receipt_count (conversation_id, seq, message_id, sender, audience, read_count)
        VALUES (\(message.conversation.rawValue), \(message.seq.rawValue), \(message.id.rawValue),
            \(message.sender.rawValue), \(max(0, audience)), \(readCount))
        """
    }

    /// The count of a group message that asks for receipts as it is sent: its audience is the group's other members.
    public static func insert(sent message: WireMessage) -> SQLQuery {
        """
        INSERT INTO receipt_count (conversation_id, seq, message_id, sender, audience, read_count)
        SELECT id, \(message.seq.rawValue), \(message.id.rawValue), \(message.sender.rawValue),
            CASE WHEN member_count > 1 THEN member_count - 1 ELSE 0 END, 0
        FROM conversation WHERE id = \(message.conversation.rawValue)
        """
    }
}

/// Counts a reader once for every message asking for receipts that its shared position newly covers (a range above
/// its old watermark, less what it had acked one by one, plus its new one-by-one acks), keeps the note left with
/// acks, and returns each count raised, by seq.
public struct CountReadsProcedure: SQLProcedure {
    private let read: ResolvedRead
    private var queries: [SQLQuery] = []
    private var changes: [ReceiptUpdate] = []
    private var counted = 0

    public init(_ read: ResolvedRead, newly: (range: ClosedRange<Seq>?, excluding: [Seq], acks: [Seq])) {
        self.read = read
        let (group, reader) = (read.conversation.rawValue, read.reader.rawValue)
        if let range = newly.range {
            queries.append(
                """
                UPDATE receipt_count SET read_count = read_count + 1
                WHERE conversation_id = \(group) AND seq BETWEEN \(range.lowerBound.rawValue)
                    AND \(range.upperBound.rawValue) AND sender <> \(reader)
                    AND seq NOT IN \(list: newly.excluding.map(\.rawValue))
                RETURNING message_id, sender, audience, read_count, seq
                """
            )
        }
        if !newly.acks.isEmpty {
            queries.append(
                """
                UPDATE receipt_count SET read_count = read_count + 1
                WHERE conversation_id = \(group) AND seq IN \(list: newly.acks.map(\.rawValue)) AND sender <> \(reader)
                RETURNING message_id, sender, audience, read_count, seq
                """
            )
        }
        counted = queries.count
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<[ReceiptUpdate]> {
        if let rows, counted > 0 {
            for row in rows {
                changes.append(ReceiptUpdate(seq: Seq(try row.int64(4)), tally: try ReceiptTally(row)))
            }
            counted -= 1
            if counted == 0 { queueNotes() }
        }
        guard !queries.isEmpty else { return .done(changes.sorted { $0.seq < $1.seq }) }
        return .run(queries.removeFirst())
    }

    /// The note left with a message read ack, on the messages it named whose count it raised.
    private mutating func queueNotes() {
        guard let note = read.note, case .seqs(let namedSeqs) = read.target else { return }
        let named = Set(namedSeqs)
        let seqs: [Int64] = changes.map(\.seq).filter { named.contains($0) }.map(\.rawValue)
        guard !seqs.isEmpty else { return }
        queries.append(
            """
            INSERT INTO read_note (conversation_id, seq, account, content)
            SELECT \(read.conversation.rawValue), value, \(read.reader.rawValue), \(note)
            FROM \(list: seqs) AS l WHERE true
            ON CONFLICT DO NOTHING
            """
        )
    }
}

/// How many of the message's audience there are and how many of them read it already, when its sender asks for
/// receipts after sending it: members who were there at send time (still here, or gone after reading it).
public struct ReceiptRequestProcedure: SQLProcedure {
    private let target: WireMessage
    private var current: (audience: Int, readers: Int)?

    public init(_ target: WireMessage) {
        self.target = target
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<(audience: Int, readCount: Int)> {
        let (group, seq) = (target.conversation.rawValue, target.seq.rawValue)
        guard let rows else {
            return .run(
                """
                SELECT count(*), coalesce(sum(CASE WHEN r.read_seq >= \(seq) OR EXISTS (SELECT 1 FROM read_ack a
                        WHERE a.conversation_id = cm.conversation_id AND a.account = cm.account AND a.seq = \(seq)
                            AND a.shared) THEN 1 ELSE 0 END), 0)
                FROM conversation_member cm
                JOIN receipt r ON r.conversation_id = cm.conversation_id AND r.account = cm.account
                WHERE cm.conversation_id = \(group) AND cm.joined_seq < \(seq) AND cm.account <> \(target.sender.rawValue)
                """
            )
        }
        guard let current else {
            current = (try rows.first?.int(0) ?? 0, try rows.first?.int(1) ?? 0)
            return .run(FormerMember.query(of: target.conversation, around: target.seq))
        }
        let formerReaders = try rows.map(FormerMember.init)
            .filter { $0.account != target.sender && $0.read(target.seq) != nil }.count
        return .done((current.audience + formerReaders, current.readers + formerReaders))
    }
}

extension ReceiptRequestProcedure {
    /// What asking for receipts writes after its entry: the message asks for them, and its count starts.
    public static func writes(_ target: WireMessage, audience: Int, readCount: Int) -> [SQLQuery] {
        [
            "UPDATE message SET needs_receipt = TRUE WHERE id = \(target.id.rawValue)",
            ReceiptTally.insert(target, audience: audience, readCount: readCount),
        ]
    }
}
