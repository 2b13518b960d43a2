// Courier — Apache-2.0
internal import GRDB

/// The account's own view of its conversations (ADR 0029), as the server last said: what it cleared and deleted for
/// itself (hidden from every local query, and not unread), whether it muted or pinned them. The draft is this device's
/// alone.
extension LocalStore {
    /// Applies the server's view of one conversation: muted and pinned as said; cleared and deleted only grow.
    static func applyView(_ db: Database, _ view: ConversationView, in conversation: ConversationID) throws {
        try db.execute(
            sql: """
                UPDATE conversation SET clearedSeq = max(clearedSeq, ?1), muted = ?2, pinnedAt = ?3 WHERE id = ?4
                """,
            arguments: [view.cleared.rawValue, view.muted, view.pinnedAt?.rawValue, conversation.rawValue]
        )
        for seq in view.deletedSeqs {
            try db.execute(
                sql: "INSERT OR IGNORE INTO deletedEntry (conversationId, seq) VALUES (?, ?)",
                arguments: [conversation.rawValue, seq.rawValue]
            )
        }
        try db.execute(
            sql: """
                DELETE FROM deletedEntry WHERE conversationId = ?1
                  AND seq <= (SELECT clearedSeq FROM conversation WHERE id = ?1)
                """,
            arguments: [conversation.rawValue]
        )
    }

    /// Applies a `view` event or a `changeView` ack.
    func apply(_ event: ViewEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            guard try Self.conversationExists(db, event.conversation) else { return changes }
            try Self.applyView(db, event.view, in: event.conversation)
            changes.touched.insert(event.conversation)
            return changes
        }
    }

    /// The SQL condition (on `message` as `m`) of an entry the account has not cleared or deleted for itself.
    static let shown = """
        m.seq > (SELECT clearedSeq FROM conversation c WHERE c.id = m.conversationId)
        AND NOT EXISTS (SELECT 1 FROM deletedEntry d WHERE d.conversationId = m.conversationId AND d.seq = m.seq)
        """

    /// Keeps `draft` (nil or empty: none) with the conversation, on this device.
    func setDraft(_ draft: String?, in conversation: ConversationID) async throws(CourierError) {
        try await write { db in
            try Self.ensureConversation(db, conversation)
            try db.execute(
                sql: "UPDATE conversation SET draft = ? WHERE id = ?",
                arguments: [draft?.isEmpty == false ? draft : nil, conversation.rawValue]
            )
        }
    }

    func draft(in conversation: ConversationID) async throws(CourierError) -> String? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT draft FROM conversation WHERE id = ?", arguments: [conversation.rawValue])
        }
    }
}
