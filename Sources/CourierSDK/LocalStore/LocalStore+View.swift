// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// The account's own view of its conversations (ADR 0029), as the server last said: what it cleared and deleted for
/// itself (hidden from every local query, and not unread), whether it muted or pinned them. The draft is this device's
/// alone.
extension LocalStore {
    /// Applies the server's view of one conversation: muted and pinned as said; cleared and deleted only grow.
    /// Whether anything changed (a sync carries every changed conversation's view, mostly unchanged).
    @discardableResult
    static func applyView(_ db: Database, _ view: ConversationView, in conversation: ConversationID) throws -> Bool {
        try db.execute(
            sql: """
                UPDATE conversation SET clearedSeq = max(clearedSeq, ?1), muted = ?2, pinnedAt = ?3, hiddenSeq = ?5
                WHERE id = ?4 AND (clearedSeq < ?1 OR muted IS NOT ?2 OR pinnedAt IS NOT ?3 OR hiddenSeq IS NOT ?5)
                """,
            arguments: [
                view.cleared.rawValue, view.muted, view.pinnedAt?.rawValue, conversation.rawValue,
                view.hiddenUpTo?.rawValue ?? 0,
            ]
        )
        var changed = db.changesCount > 0
        for seq in view.deletedSeqs {
            try db.execute(
                sql: "INSERT OR IGNORE INTO deletedEntry (conversationId, seq) VALUES (?, ?)",
                arguments: [conversation.rawValue, seq.rawValue]
            )
            changed = changed || db.changesCount > 0
        }
        guard changed else { return false }
        try db.execute(
            sql: """
                DELETE FROM deletedEntry WHERE conversationId = ?1
                  AND seq <= (SELECT clearedSeq FROM conversation WHERE id = ?1)
                """,
            arguments: [conversation.rawValue]
        )
        return true
    }

    /// Applies a `view` event or a `changeView` ack.
    func apply(_ event: ViewEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            // A conversation this device has not stored yet keeps the view for when its entries come.
            try Self.ensureConversation(db, event.conversation)
            if try Self.applyView(db, event.view, in: event.conversation) { changes.touched.insert(event.conversation) }
            return changes
        }
    }

    /// The SQL condition (on `message` as `m`) of an entry the account has not cleared or deleted for itself;
    /// `conversation` is the expression naming its conversation (a bound parameter when there is one: the cleared seq
    /// is then read once per statement, not once per row).
    static func shown(in conversation: String = "m.conversationId") -> String {
        """
        m.seq > coalesce((SELECT clearedSeq FROM conversation c WHERE c.id = \(conversation)), 0)
        AND NOT EXISTS (SELECT 1 FROM deletedEntry d WHERE d.conversationId = m.conversationId AND d.seq = m.seq)
        """
    }

    /// Up to where the account cleared the conversation (0: nothing).
    func clearedSeq(in conversation: ConversationID) async throws(CourierError) -> Seq {
        try await read { db in
            Seq(
                try Int64.fetchOne(
                    db,
                    sql: "SELECT clearedSeq FROM conversation WHERE id = ?",
                    arguments: [conversation.rawValue]
                ) ?? 0
            )
        }
    }

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

    /// Queues a change of the account's view and shows it here at once, as the server will make it: muted, pinned
    /// (now), hidden up to this device's newest entry, cleared up to it, the named messages stored here deleted. The
    /// server's answer, when it comes, replaces it (``apply(_:me:then:)``).
    func queueViewChange(
        _ request: ChangeViewRequest,
        token: String,
        at now: Timestamp,
        me: AccountID,
        then publish: @escaping Publish
    ) async throws(CourierError) {
        let encoded: String
        do { encoded = String(decoding: try JSONEncoder().encode(request), as: UTF8.self) } catch {
            throw CourierError.reported(error)
        }
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            let conversation = request.conversation.rawValue
            try Self.ensureConversation(db, request.conversation)
            try db.execute(
                sql: "INSERT INTO viewOutbox (conversationId, request, token) VALUES (?, ?, ?)",
                arguments: [conversation, encoded, token]
            )
            let newest = try Self.lastSeq(db, request.conversation).rawValue
            if let muted = request.muted {
                try db.execute(sql: "UPDATE conversation SET muted = ? WHERE id = ?", arguments: [muted, conversation])
            }
            if let pinned = request.pinned {
                try db.execute(
                    sql: "UPDATE conversation SET pinnedAt = ? WHERE id = ?",
                    arguments: [pinned ? now.rawValue : nil, conversation]
                )
            }
            if let hidden = request.hidden {
                try db.execute(
                    sql: "UPDATE conversation SET hiddenSeq = ? WHERE id = ?",
                    arguments: [hidden ? newest : 0, conversation]
                )
            }
            if request.clear == true {
                try db.execute(
                    sql: "UPDATE conversation SET clearedSeq = max(clearedSeq, ?) WHERE id = ?",
                    arguments: [newest, conversation]
                )
                try db.execute(
                    sql: "DELETE FROM deletedEntry WHERE conversationId = ?1 AND seq <= ?2",
                    arguments: [conversation, newest]
                )
            }
            for id in request.deleteMessageIds ?? [] {
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO deletedEntry (conversationId, seq)
                        SELECT conversationId, seq FROM message WHERE id = ?1 AND conversationId = ?2
                          AND seq > (SELECT clearedSeq FROM conversation WHERE id = ?2)
                        """,
                    arguments: [id.rawValue, conversation]
                )
            }
            changes.touched.insert(request.conversation)
            return changes
        }
    }

    /// The queued view changes, oldest first.
    func queuedViewChanges() async throws(CourierError) -> [(id: Int64, request: ChangeViewRequest, token: String)] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT id, request, token FROM viewOutbox ORDER BY id").map {
                (id: $0[0] as Int64, request: $0[1] as String, token: $0[2] as String)
            }
        }
        return rows.compactMap { row in
            guard let request = try? JSONDecoder().decode(ChangeViewRequest.self, from: Data(row.request.utf8)) else {
                return nil
            }
            return (row.id, request, row.token)
        }
    }

    /// Removes a queued view change the server answered, and applies its answer (the view as the server holds it).
    func completeViewChange(
        _ id: Int64,
        with event: ViewEvent?,
        me: AccountID,
        then publish: @escaping Publish
    ) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            try db.execute(sql: "DELETE FROM viewOutbox WHERE id = ?", arguments: [id])
            if let event {
                try Self.ensureConversation(db, event.conversation)
                if try Self.applyView(db, event.view, in: event.conversation) { changes.touched.insert(event.conversation) }
            }
            return changes
        }
    }
}
