// Courier — Apache-2.0
public import CourierDomain
internal import CourierStorage
public import CourierWire

/// A reply's quoted excerpt of the message it answers, decided in the append's own transaction from the replied-to
/// message as that transaction finds it: a reply that commits after a recall quotes nothing, and one that commits
/// before it is unquoted by the recall (``RecallPlan/Write/unquoteReplies(_:)``), so no reply keeps a recalled text;
/// an edit requotes the replies that commit before it (``EditPlan/Write/requoteReplies(_:)``).
public enum ReplyQuote {
    /// How much of the replied-to message a reply quotes.
    public static let characters = 120

    /// The replied-to message's body, type and state, read in the caller's transaction (which holds the
    /// conversation's lock where the backend has one: a recall of it commits wholly before or after).
    public static func query(_ id: MessageID, in conversation: ConversationID) -> SQLQuery {
        """
        SELECT body, type, recalled, recall IS NOT NULL FROM message
        WHERE id = \(id.rawValue) AND conversation_id = \(conversation.rawValue)
        """
    }

    /// The excerpt to store: text only (the body of an attachment or an app-defined message is JSON, no excerpt to
    /// show), and none of a message that is recalled, a notice, or gone.
    public static func excerpt(_ row: SQLRow?) throws(StorageError) -> String? {
        guard let row, try row.optionalString(1) == nil, try !row.bool(2), try !row.bool(3) else { return nil }
        return excerpt(of: try row.string(0))
    }

    /// The start of a text body a reply quotes (an edit's new body, for the replies it requotes).
    public static func excerpt(of body: String) -> String { String(body.prefix(characters)) }
}
