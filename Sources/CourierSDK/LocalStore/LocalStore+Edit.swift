// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

extension LocalStore {
    /// How much of a text message a reply quotes: the server's excerpt (its `ReplyQuote`).
    static let quotedCharacters = 120

    /// Applies an edit entry to the message it edits, if this device holds it (ADR 0054): its body and `ext` become
    /// the entry's, `editedAt` the entry's time, and the replies that quote it quote the new text. An edit older than
    /// the version held (history fetched after a later edit), an edit erased by a recall, or an edit of a recalled
    /// message changes nothing.
    ///
    /// - Returns: The message as it is now, or `nil` when nothing changed.
    static func applyEdit(_ db: Database, _ notice: WireEditNotice, entry: WireMessage, me: AccountID) throws -> Message? {
        guard !entry.isRecalled else { return nil }
        try db.execute(
            sql: """
                UPDATE message SET body = ?, ext = ?, editedAt = ?
                WHERE id = ? AND conversationId = ? AND recalled = 0 AND (editedAt IS NULL OR editedAt <= ?)
                """,
            arguments: [
                entry.body, Self.json(ext: entry.ext), entry.time.rawValue, notice.messageID.rawValue,
                entry.conversation.rawValue, entry.time.rawValue,
            ]
        )
        guard db.changesCount > 0 else { return nil }
        // Only a text message is quoted: replies of anything else hold no quote to follow.
        try db.execute(
            sql: "UPDATE message SET quote = ? WHERE replyTo = ? AND conversationId = ? AND quote IS NOT NULL",
            arguments: [
                String(entry.body.prefix(quotedCharacters)), notice.messageID.rawValue, entry.conversation.rawValue,
            ]
        )
        return try fetchMessages(db, entry.conversation, me: me, where: "id = ?", [notice.messageID.rawValue]).first
    }
}
