// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// History pages and single messages, written once for backends that run ``SQLQuery``s. SQLite keeps its own: its
/// pages are what `sync` reads, decoded where the rows lie (docs/benchmarks-history.md, "Sync pages").
extension MessageStore where Self: SQLRunner {
    public func messages(in conversation: ConversationID, after seq: Seq, limit: Int) async throws(StorageError)
        -> [WireMessage]
    {
        try await readRows(
            WireMessage.query(
                "WHERE conversation_id = \(conversation.rawValue) AND seq > \(seq.rawValue) ORDER BY seq LIMIT \(limit)"
            )
        ).map(WireMessage.init)
    }

    public func messages(in conversation: ConversationID, before seq: Seq?, limit: Int) async throws(StorageError)
        -> [WireMessage]
    {
        try await readRows(
            WireMessage.query(
                """
                WHERE conversation_id = \(conversation.rawValue) AND seq < \(seq?.rawValue ?? Int64.max)
                ORDER BY seq DESC LIMIT \(limit)
                """
            )
        ).map(WireMessage.init).reversed()
    }

    public func message(_ id: MessageID) async throws(StorageError) -> WireMessage? {
        try await readRows(WireMessage.query("WHERE id = \(id.rawValue)")).first.map(WireMessage.init)
    }
}

/// The `message` row, described once for both backends: the columns an entry is read from and written with, and
/// how a ``MessageDraft`` is written (``MessageDraft/rowValues``) and an entry read back (``WireMessage/init(_:)``).
extension WireMessage {
    /// The columns ``init(_:)`` reads, in its order.
    public static let columns = """
        id, conversation_id, seq, client_id, sender, time, body, reply_to, quote, recall, recalled, needs_receipt, \
        group_change, receipt_request, type, ext, edit, edited_at
        """

    /// The log's entries that `condition` (`WHERE …`, and an order and a limit) selects: ``init(_:)`` reads each.
    public static func query(_ condition: SQLQuery) -> SQLQuery {
        "SELECT \(unescaped: columns) FROM message \(condition)"
    }

    /// An entry from a row of ``columns``.
    @inlinable
    public init(_ row: some SQLRowReading) throws(StorageError) {
        self.init(
            id: MessageID(rawValue: try row.string(0)),
            conversation: ConversationID(rawValue: try row.string(1)),
            seq: Seq(try row.int64(2)),
            clientID: ClientMessageID(rawValue: try row.string(3)),
            sender: AccountID(rawValue: try row.string(4)),
            time: Timestamp(milliseconds: try row.int64(5)),
            type: try row.optionalString(14),
            body: try row.string(6),
            replyTo: try row.optionalString(7).map(MessageID.init(rawValue:)),
            quote: try row.optionalString(8),
            recall: try EntryJSON.decode(WireRecallNotice.self, try row.optionalString(9)),
            recalled: try row.bool(10) ? true : nil,
            needsReadReceipt: try row.bool(11) ? true : nil,
            group: try EntryJSON.decode(WireGroupChange.self, try row.optionalString(12)),
            receiptRequest: try row.optionalString(13).map(MessageID.init(rawValue:)),
            ext: try EntryJSON.decode([String: String].self, try row.optionalString(15)),
            edit: try EntryJSON.decode(WireEditNotice.self, try row.optionalString(16)),
            editedAt: try row.optionalInt64(17).map(Timestamp.init(milliseconds:))
        )
    }
}

extension MessageDraft {
    /// A value an entry's insert binds.
    public enum RowValue: Sendable {
        case text(String?)
        case bool(Bool)
    }

    /// The columns an entry's insert writes from the draft, after `conversation_id, seq, id, sender, client_id,
    /// time` (which each backend binds where its statement assigns the seq and the time), in ``rowValues``' order.
    public static let rowColumns = rowColumnNames.joined(separator: ", ")

    /// ``rowColumns``, one name each.
    public static let rowColumnNames = [
        "body", "reply_to", "quote", "recall", "counts_unread", "needs_receipt", "group_change", "receipt_request",
        "type", "ext", "edit", "edit_of",
    ]

    /// What the draft writes to ``rowColumns``, encoded as the row keeps it (JSON for a recall, a group change, `ext`
    /// and an edit).
    public var rowValues: [RowValue] {
        get throws {
            var values: [RowValue] = []
            values.reserveCapacity(Self.rowColumnNames.count)
            try forEachRowValue { values.append($0) }
            return values
        }
    }

    /// ``rowValues`` one at a time, in ``rowColumns``' order, with no array between: a run of imported messages binds
    /// thousands of rows.
    @inlinable
    public func forEachRowValue(_ write: (RowValue) -> Void) throws {
        write(.text(body))
        write(.text(replyTo?.rawValue))
        write(.text(quote))
        write(.text(try EntryJSON.encode(recall)))
        write(.bool(countsAsUnread))
        write(.bool(needsReadReceipt))
        write(.text(try EntryJSON.encode(group)))
        write(.text(receiptRequest?.rawValue))
        write(.text(type))
        write(.text(try EntryJSON.encode(ext)))
        write(.text(try EntryJSON.encode(edit)))
        write(.text(edit?.messageID.rawValue))
    }
}

/// Creates a direct conversation and its two members, on its first entry: both accounts must be registered. The
/// backend has checked that the conversation does not exist yet (a racing creator's rows are left as they are).
public struct CreateDirectConversation: SQLProcedure {
    private let conversation: ConversationID
    private let members: [AccountID]
    private var check: Nested<AccountCheck>
    private var writes: [SQLQuery] = []

    /// - Throws: ``StorageError/conversationNotFound(_:)`` when `conversation` is not a direct conversation's id.
    public init(_ conversation: ConversationID) throws(StorageError) {
        guard let (first, second) = conversation.directMembers else { throw .conversationNotFound(conversation) }
        self.conversation = conversation
        members = [first, second]
        check = Nested(AccountCheck(members))
    }

    public mutating func step(_ rows: [SQLRow]?) throws(StorageError) -> SQLStep<Void> {
        if writes.isEmpty {
            switch try check.step(rows) {
            case .run(let query): return .run(query)
            case .done:
                let id = conversation.rawValue
                writes = [
                    """
                    INSERT INTO conversation (id, kind, member_count) VALUES (\(id), 'direct', 2)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    """
                    INSERT INTO conversation_member (conversation_id, account)
                    SELECT \(id), value FROM \(list: members.map(\.rawValue)) AS l WHERE true ON CONFLICT DO NOTHING
                    """,
                ]
                return .run(writes[0])
            }
        }
        writes.removeFirst()
        guard let next = writes.first else { return .done(()) }
        return .run(next)
    }
}
