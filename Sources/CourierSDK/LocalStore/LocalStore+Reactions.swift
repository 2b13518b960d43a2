// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

extension LocalStore {
    /// Applies a `reaction` event (ADR 0055): the message's counts when the event is newer than what this device holds,
    /// and the account's own reactions when it reacted; reports the change.
    func apply(_ event: ReactionEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            var mine = try Self.myReactions(db, of: event.messageID)
            if event.account == me {
                if event.added { mine.insert(event.reaction) } else { mine.remove(event.reaction) }
            }
            let stored = try Self.storeReactions(
                db,
                of: event.messageID,
                counts: event.counts,
                mine: mine,
                version: event.version
            )
            if stored {
                changes.reactions.append(
                    ReactionUpdate(
                        conversation: event.conversation,
                        messageID: event.messageID,
                        account: event.account,
                        reaction: event.reaction,
                        added: event.added,
                        counts: event.counts,
                        myReactions: mine.sorted()
                    )
                )
            }
            return changes
        }
    }

    /// Keeps the reactions the server answered (an ack, or a `reactions` query) when they are not older than those
    /// held.
    func store(_ reactions: [WireReactions]) async throws(CourierError) {
        _ = try await write { db in
            for message in reactions {
                _ = try Self.storeReactions(
                    db,
                    of: message.messageID,
                    counts: message.counts,
                    mine: Set(message.mine),
                    version: message.version
                )
            }
        }
    }

    /// The reactions of a message as this device holds them: counts in reaction order, and the account's own.
    static func reactions(_ db: Database, of message: MessageID) throws -> (counts: [ReactionCount], mine: [String]) {
        var counts: [ReactionCount] = []
        var mine: [String] = []
        for row in try Row.fetchAll(
            db,
            sql: "SELECT reaction, total, mine FROM messageReaction WHERE messageId = ? ORDER BY reaction",
            arguments: [message.rawValue]
        ) {
            counts.append(ReactionCount(reaction: row[0], count: row[1]))
            if row[2] as Bool { mine.append(row[0]) }
        }
        return (counts, mine)
    }

    private static func myReactions(_ db: Database, of message: MessageID) throws -> Set<String> {
        Set(
            try String.fetchAll(
                db,
                sql: "SELECT reaction FROM messageReaction WHERE messageId = ? AND mine",
                arguments: [message.rawValue]
            )
        )
    }

    /// Replaces a held message's reactions when `version` is not older than the one held; whether it did.
    private static func storeReactions(
        _ db: Database,
        of message: MessageID,
        counts: [ReactionCount],
        mine: Set<String>,
        version: Int64
    ) throws -> Bool {
        try db.execute(
            sql: "UPDATE message SET reactionVersion = ? WHERE id = ? AND reactionVersion <= ?",
            arguments: [version, message.rawValue, version]
        )
        guard db.changesCount > 0 else { return false }
        try db.execute(sql: "DELETE FROM messageReaction WHERE messageId = ?", arguments: [message.rawValue])
        for count in counts where count.count > 0 {
            try db.execute(
                sql: "INSERT INTO messageReaction (messageId, reaction, total, mine) VALUES (?, ?, ?, ?)",
                arguments: [message.rawValue, count.reaction, count.count, mine.contains(count.reaction)]
            )
        }
        return true
    }
}
