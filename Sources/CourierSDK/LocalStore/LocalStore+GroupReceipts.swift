// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// Your group messages' read receipts as this device heard them: counts and readers from events and queries, kept for
/// local queries and live queries offline.
extension LocalStore {
    /// Keeps readers of `message` that a read list fetched from the server named (with their notes).
    func storeReaders(_ entries: [ReceiptListEntry], of message: MessageID) async throws(CourierError) {
        _ = try await write { db in
            for entry in entries {
                guard let time = entry.time else { continue }
                try Self.keepReader(db, entry.account, at: time, content: entry.content, of: message)
            }
        }
    }

    /// Keeps one reader of `message`; whether it was new here.
    @discardableResult
    static func keepReader(
        _ db: Database,
        _ account: AccountID,
        at time: Timestamp,
        content: String?,
        of message: MessageID
    ) throws -> Bool {
        try db.execute(
            sql: "INSERT INTO groupReader (messageId, account, time, content) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            arguments: [message.rawValue, account.rawValue, time.rawValue, content]
        )
        return db.changesCount > 0
    }

    /// Applies new readers of your group messages: the counts only grow, readers are kept for local queries.
    func apply(_ event: GroupReceiptsEvent, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish) { db in
            var changes = InboundChanges()
            for update in event.updates {
                try db.execute(
                    sql: """
                        UPDATE message SET readCount = ?, unreadCount = ?
                        WHERE id = ? AND (readCount IS NULL OR readCount < ?)
                        """,
                    arguments: [update.readCount, update.unreadCount, update.messageID.rawValue, update.readCount]
                )
                guard db.changesCount > 0 else { continue }
                for (account, time) in update.readers {
                    try Self.keepReader(db, account, at: time, content: update.contents?[account], of: update.messageID)
                }
                changes.groupReceipts.append(
                    GroupReadReceiptUpdate(
                        conversation: event.conversation,
                        messageID: update.messageID,
                        readers: update.readers,
                        contents: update.contents ?? [:],
                        readCount: update.readCount,
                        unreadCount: update.unreadCount
                    )
                )
            }
            return changes
        }
    }

    /// Stores receipt counts fetched from the server (they only grow); with `publish`, the counts that changed are
    /// reported as events.
    /// Returns the counts that moved.
    @discardableResult
    func store(
        _ counts: [ReceiptCount],
        in conversation: ConversationID? = nil,
        then publish: Publish? = nil
    ) async throws(CourierError) -> [ReceiptCount] {
        try await write { db in
            var changes = InboundChanges()
            var moved: [ReceiptCount] = []
            for count in counts where count.recalled != true {
                try db.execute(
                    sql: """
                        UPDATE message SET readCount = ?1, unreadCount = ?2
                        WHERE id = ?3 AND (readCount IS NULL OR readCount <= ?1)
                            AND (readCount IS NOT ?1 OR unreadCount IS NOT ?2)
                        """,
                    arguments: [count.readCount, count.unreadCount, count.messageID.rawValue]
                )
                guard db.changesCount > 0 else { continue }
                moved.append(count)
                guard let conversation, publish != nil else { continue }
                changes.groupReceipts.append(
                    GroupReadReceiptUpdate(
                        conversation: conversation,
                        messageID: count.messageID,
                        readers: [:],
                        contents: [:],
                        readCount: count.readCount,
                        unreadCount: count.unreadCount
                    )
                )
            }
            if let publish {
                let result = changes
                db.afterNextTransaction { _ in publish(result) }
            }
            return moved
        }
    }

    /// Keeps the readers of `count`'s message that a read list named, and reports those new to this device with the
    /// message's counts (a group's counts that moved while the device was away: the readers come with them, so an
    /// app that merges each update's readers has them all).
    func storeReaders(
        _ entries: [ReceiptListEntry],
        of count: ReceiptCount,
        in conversation: ConversationID,
        then publish: @escaping Publish
    ) async throws(CourierError) {
        try await write(publishing: publish) { db in
            var readers: [AccountID: Timestamp] = [:]
            var contents: [AccountID: String] = [:]
            for entry in entries {
                guard let time = entry.time,
                    try Self.keepReader(db, entry.account, at: time, content: entry.content, of: count.messageID)
                else { continue }
                readers[entry.account] = time
                if let content = entry.content { contents[entry.account] = content }
            }
            let update = GroupReadReceiptUpdate(
                conversation: conversation,
                messageID: count.messageID,
                readers: readers,
                contents: contents,
                readCount: count.readCount,
                unreadCount: count.unreadCount
            )
            return InboundChanges(groupReceipts: [update])
        }
    }

    /// Your most recent group messages that asked for receipts and are not read by everyone as far as this device
    /// knows, by group (at most `limit` in all): their counts may have changed while this device was away.
    func incompleteReceiptCounts(me: AccountID, limit: Int) async throws(CourierError) -> [ConversationID: [MessageID]] {
        try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, conversationId FROM message
                    WHERE sender = ? AND needsReadReceipt = 1 AND recalled = 0
                        AND (readCount IS NULL OR unreadCount IS NULL OR unreadCount > 0)
                    ORDER BY time DESC LIMIT ?
                    """,
                arguments: [me.rawValue, limit]
            )
            return Dictionary(grouping: rows, by: { ConversationID(rawValue: $0[1]) })
                .mapValues { $0.map { MessageID(rawValue: $0[0]) } }
        }
    }
}
