// Courier — Apache-2.0
public import Foundation
internal import GRDB
public import CourierWire

/// A line of text your app put in a chat on this device ("You are now friends", "Messages are end-to-end…"): never
/// sent, never synced, shown among the messages after the one that was newest when it was inserted (ADR 0029).
///
/// NIM `saveMessage:forSession:completion:` with a `NIMTipObject`, Agora `insertMessage:error:`, RongCloud
/// `insertOutgoingMessage:targetId:sentStatus:content:`. For a tip in place of a recalled message, see
/// ``CourierClient/insertRecallTip(for:text:)``.
public struct LocalTip: Sendable, Hashable, Identifiable {
    public let id: String
    public let conversation: ConversationID
    /// It shows after the entry at this seq (0: before every message).
    public let afterSeq: Seq
    /// When it was inserted (device clock).
    public let date: Date
    public let text: String
}

extension CourierClient {
    /// Puts a tip in a conversation on this device, after the newest message it holds. It shows in
    /// ``liveMessages(in:limit:)`` and ``ChatModel`` as a ``ChatItem/tip(_:)``; a clear hides it with what it follows.
    @discardableResult
    public func insertTip(_ text: String, in conversation: ConversationID) async throws -> LocalTip {
        _ = try member(of: conversation)
        return try await store.insertTip(text, in: conversation, at: Date())
    }

    /// Removes a tip this device inserted; whether there was one.
    @discardableResult
    public func removeTip(_ id: LocalTip.ID) async throws -> Bool {
        try await store.removeTip(id)
    }
}

extension LocalStore {
    func insertTip(_ text: String, in conversation: ConversationID, at date: Date) async throws(CourierError) -> LocalTip {
        try await write { db in
            try Self.ensureConversation(db, conversation)
            let after = try Self.highestSeq(db, conversation)
            let tip = LocalTip(
                id: UUID().uuidString.lowercased(),
                conversation: conversation,
                afterSeq: Seq(after),
                date: Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000),
                text: text
            )
            try db.execute(
                sql: "INSERT INTO localTip (id, conversationId, afterSeq, time, text) VALUES (?, ?, ?, ?, ?)",
                arguments: [
                    tip.id, conversation.rawValue, after, Int64((tip.date.timeIntervalSince1970 * 1000).rounded()), text,
                ]
            )
            return tip
        }
    }

    func removeTip(_ id: String) async throws(CourierError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM localTip WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    /// `messages` (in seq order) with the conversation's tips that follow the first of them (all of them when there is
    /// none) put after the entry they follow; tips at or below what the account cleared are left out.
    static func withTips(_ db: Database, _ messages: [Message], in conversation: ConversationID) throws -> [ChatItem] {
        let from = messages.first?.seq.rawValue ?? 0
        var tips = try Row.fetchAll(
            db,
            sql: """
                SELECT id, afterSeq, time, text FROM localTip
                WHERE conversationId = ?1 AND afterSeq >= ?2
                  AND afterSeq > coalesce((SELECT clearedSeq FROM conversation WHERE id = ?1), 0)
                ORDER BY afterSeq, time, id
                """,
            arguments: [conversation.rawValue, from]
        ).map { row in
            LocalTip(
                id: row[0],
                conversation: conversation,
                afterSeq: Seq(row[1] as Int64),
                date: Date(timeIntervalSince1970: Double(row[2] as Int64) / 1000),
                text: row[3]
            )
        }[...]
        guard !tips.isEmpty else { return messages.map(ChatItem.message) }
        var items: [ChatItem] = []
        for message in messages {
            while let tip = tips.first, tip.afterSeq < message.seq { items.append(.tip(tips.removeFirst())) }
            items.append(.message(message))
        }
        items += tips.map(ChatItem.tip)
        return items
    }
}
