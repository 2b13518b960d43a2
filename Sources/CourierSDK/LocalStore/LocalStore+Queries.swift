// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

extension LocalStore {
    /// Messages of a conversation in seq order: the newest `limit` below `before` (all when `nil`).
    func messages(
        in conversation: ConversationID,
        before: Seq?,
        limit: Int,
        me: AccountID
    ) async throws(CourierError)
        -> [Message]
    {
        try await read { db in try Self.fetchMessages(db, conversation, before: before, limit: limit, me: me) }
    }

    static func fetchMessages(
        _ db: Database,
        _ conversation: ConversationID,
        before: Seq?,
        limit: Int,
        me: AccountID
    ) throws -> [Message] {
        try fetchMessages(
            db,
            conversation,
            me: me,
            where: "seq < ? ORDER BY seq DESC LIMIT ?",
            [before?.rawValue ?? Int64.max, limit]
        ).reversed()
    }

    /// Text messages whose body holds every word of `query` (each word also as the start of a longer one), newest
    /// first, from the full-text index (schema v11).
    func search(_ query: String, in conversation: ConversationID?, limit: Int, me: AccountID) async throws(CourierError)
        -> [Message]
    {
        // Each word quoted (so nothing the user types is FTS5 syntax), as a prefix; all of them must match.
        let words = query.split { !$0.isLetter && !$0.isNumber }.map { "\"\($0)\"*" }
        guard !words.isEmpty else { return [] }
        return try await read { db in
            var sql = """
                SELECT m.id, m.conversationId FROM messageText t JOIN message m ON m.rowid = t.rowid
                WHERE messageText MATCH ? AND \(Self.shown())
                """
            var arguments: StatementArguments = [words.joined(separator: " ")]
            if let conversation {
                sql += " AND m.conversationId = ?"
                arguments += [conversation.rawValue]
            }
            sql += " ORDER BY m.time DESC, m.seq DESC LIMIT ?"
            arguments += [limit]
            let hits = try Row.fetchAll(db, sql: sql, arguments: arguments).map {
                (MessageID(rawValue: $0[0]), ConversationID(rawValue: $0[1]))
            }
            var found: [MessageID: Message] = [:]
            for conversation in Set(hits.map(\.1)) {
                let ids = hits.filter { $0.1 == conversation }.map(\.0.rawValue)
                let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ", ")
                for message in try Self.fetchMessages(
                    db, conversation, me: me, where: "id IN (\(placeholders))", StatementArguments(ids)
                ) {
                    found[message.id] = message
                }
            }
            return hits.compactMap { found[$0.0] }
        }
    }

    /// The stored entries just below `before`, up to `limit` of them counted by seq (notices included): whether they
    /// are all held without a hole, the lowest seq, and the messages among them.
    func page(in conversation: ConversationID, before: Seq, limit: Int, me: AccountID) async throws(CourierError)
        -> (messages: [Message], lowest: Seq?, complete: Bool)
    {
        try await read { db in
            let seqs = try Int64.fetchAll(
                db,
                sql: "SELECT seq FROM message WHERE conversationId = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
                arguments: [conversation.rawValue, before.rawValue, limit]
            )
            let wanted = min(Int64(limit), before.rawValue - 1)
            let complete = seqs.count == wanted && seqs.first == before.rawValue - 1 && seqs.last == before.rawValue - wanted
            guard let lowest = seqs.last else { return ([], nil, complete) }
            let messages = try Self.fetchMessages(
                db, conversation, me: me, where: "seq >= ? AND seq < ? ORDER BY seq", [lowest, before.rawValue]
            )
            return (messages, Seq(lowest), complete)
        }
    }

    /// Every stored message of `conversation` from seq `first` on, through `last` when given, in seq order (a chat
    /// screen's window).
    static func fetchMessages(
        _ db: Database,
        _ conversation: ConversationID,
        from first: Seq,
        through last: Seq? = nil,
        me: AccountID
    ) throws -> [Message] {
        try fetchMessages(
            db, conversation, me: me, where: "seq >= ? AND seq <= ? ORDER BY seq",
            [first.rawValue, last?.rawValue ?? Int64.max]
        )
    }

    /// Where a chat screen opens: the seq of message `id` of `conversation` (`nil` when this device does not hold
    /// it), or of the oldest message of others that counts as unread (`nil` when none does).
    func anchorSeq(in conversation: ConversationID, at id: MessageID?, me: AccountID) async throws(CourierError) -> Seq? {
        let seq: Int64? = try await read { db -> Int64? in
            if let id {
                return try Int64.fetchOne(
                    db,
                    sql: "SELECT seq FROM message WHERE conversationId = ? AND id = ?",
                    arguments: [conversation.rawValue, id.rawValue]
                )
            }
            let sql = "SELECT min(m.seq) FROM message m WHERE \(Self.isUnread)"
            return try Int64.fetchOne(db, sql: sql, arguments: [conversation.rawValue, me.rawValue])
        }
        return seq.map { Seq($0) }
    }

    /// The entries stored here right above `after` without a gap, up to `limit`: the messages among them, the highest
    /// seq of that unbroken run, whether it is the whole page (`limit` entries, or every one up to the newest held),
    /// and the newest seq this device holds in the conversation.
    func page(in conversation: ConversationID, after: Seq, limit: Int, me: AccountID) async throws(CourierError)
        -> (messages: [Message], highest: Seq?, complete: Bool, newest: Seq)
    {
        try await read { db in
            let seqs = try Int64.fetchAll(
                db,
                sql: "SELECT seq FROM message WHERE conversationId = ? AND seq > ? ORDER BY seq LIMIT ?",
                arguments: [conversation.rawValue, after.rawValue, limit]
            )
            let newest = try Self.highestSeq(db, conversation)
            // The run that follows `after` one by one; a hole ends it.
            let run = seqs.enumerated().prefix { $0.element == after.rawValue + Int64($0.offset) + 1 }.map(\.element)
            let complete = run.count == limit || run.last ?? after.rawValue == newest
            guard let highest = run.last else { return ([], nil, complete, Seq(newest)) }
            let messages = try Self.fetchMessages(db, conversation, from: after.next, through: Seq(highest), me: me)
            return (messages, Seq(highest), complete, Seq(newest))
        }
    }

    /// One message by id.
    func message(_ id: MessageID, me: AccountID) async throws(CourierError) -> Message? {
        try await read { db in
            guard
                let conversation = try String.fetchOne(
                    db,
                    sql: "SELECT conversationId FROM message WHERE id = ?",
                    arguments: [id.rawValue]
                )
            else { return nil }
            return try Self.fetchMessages(
                db,
                ConversationID(rawValue: conversation),
                me: me,
                where: "id = ?",
                [id.rawValue]
            )
            .first
        }
    }

    /// The readers of a group message this device heard of.
    func readers(of message: MessageID) async throws(CourierError) -> [AccountID: Timestamp] {
        try await read { db in
            var readers: [AccountID: Timestamp] = [:]
            for row in try Row.fetchAll(
                db,
                sql: "SELECT account, time FROM groupReader WHERE messageId = ?",
                arguments: [message.rawValue]
            ) {
                readers[AccountID(rawValue: row[0])] = Timestamp(milliseconds: row[1])
            }
            return readers
        }
    }

    /// Every conversation, the most recently active first.
    func conversations(me: AccountID) async throws(CourierError) -> [Conversation] {
        try await read { db in try Self.fetchConversations(db, me: me) }
    }

    /// An edit entry neither moves a conversation up the list nor shows a hidden one: it changes a message already
    /// there (ADR 0054).
    static func fetchConversations(_ db: Database, me: AccountID) throws -> [Conversation] {
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT c.id, c.kind, c.members, c.lastSeq, c.unreadCount,
                    (SELECT max(time) FROM message m WHERE m.conversationId = c.id AND m.editOf IS NULL) AS lastTime,
                    c.muted, c.pinnedAt, c.draft, c.groupName, c.groupAvatar, c.groupAnnouncement, c.groupExt
                FROM conversation c
                WHERE c.hiddenSeq = 0 OR EXISTS (
                    SELECT 1 FROM message m WHERE m.conversationId = c.id AND m.seq > c.hiddenSeq AND m.editOf IS NULL)
                ORDER BY c.pinnedAt IS NULL, c.pinnedAt DESC, lastTime DESC, c.id
                """
        )
        return try rows.map { row in
            let id = ConversationID(rawValue: row[0])
            let members = (row[2] as String).split(separator: ",").map { AccountID(rawValue: String($0)) }
            let last = try fetchMessages(db, id, me: me, where: "1 ORDER BY seq DESC LIMIT 1", []).first
            let peer = id.kind == .group ? nil : members.first { $0 != me }
            return Conversation(
                id: id,
                kind: ConversationKind(rawValue: row[1]) ?? .direct,
                members: members,
                lastMessage: last,
                lastSeq: Seq(row[3] as Int64),
                unreadCount: row[4],
                isMuted: row[6],
                pinnedAt: (row[7] as Int64?).map(Timestamp.init(milliseconds:)),
                draft: row[8],
                groupProfile: groupProfile(row, at: 9),
                peerProfile: try peer.flatMap { try profiles(db, of: [$0])[$0] }
            )
        }
    }

    /// Messages of `conversation` matching `clause` (a WHERE continuation), with their derived status.
    static func fetchMessages(
        _ db: Database,
        _ conversation: ConversationID,
        me: AccountID,
        where clause: String,
        _ arguments: StatementArguments
    ) throws -> [Message] {
        let peers = try Row.fetchOne(
            db,
            sql: """
                SELECT coalesce(max(deliveredSeq), 0), coalesce(max(readSeq), 0)
                FROM watermark WHERE conversationId = ? AND account != ?
                """,
            arguments: [conversation.rawValue, me.rawValue]
        )
        let delivered = Seq((peers?[0] as Int64?) ?? 0)
        let peerRead = (peers?[1] as Int64?) ?? 0
        let ownRead = try readPosition(db, conversation, me).watermark.rawValue
        // Own messages are read when a peer read them; received ones when this account did.
        return try Row.fetchAll(
            db,
            sql: """
                SELECT id, seq, clientId, sender, time, coalesce(tip, body), replyTo, quote, tip IS NOT NULL,
                    needsReadReceipt, groupChange, readCount, unreadCount,
                    CASE WHEN sender = ?1
                    THEN seq <= ?2 OR EXISTS (SELECT 1 FROM readAck r
                        WHERE r.conversationId = m.conversationId AND r.account != ?1 AND r.seq = m.seq)
                    ELSE seq <= ?3 OR EXISTS (SELECT 1 FROM readAck r
                        WHERE r.conversationId = m.conversationId AND r.account = ?1 AND r.seq = m.seq)
                    END,
                    recalled, type, m.ext, p.account, p.displayName, p.avatar, p.ext, p.version, p.updatedAt,
                    m.editedAt, m.reactionVersion
                FROM message m LEFT JOIN accountProfile p ON p.account = m.sender
                WHERE conversationId = ?4 AND recall IS NULL AND receiptRequest IS NULL AND editOf IS NULL AND \(shown(in: "?4")) AND \(clause)
                """,
            // ?1–?4 here; the plain `?` of `clause` number on from ?5.
            arguments: [me.rawValue, peerRead, ownRead, conversation.rawValue] + arguments
        ).map { row in
            let seq = Seq(row[1] as Int64)
            let sender = AccountID(rawValue: row[3])
            let id = MessageID(rawValue: row[0])
            let groupChange = (row[10] as String?).flatMap {
                try? JSONDecoder().decode(WireGroupChange.self, from: Data($0.utf8))
            }
            let count = (row[11] as Int?).map {
                ReceiptCount(messageID: id, readCount: $0, unreadCount: (row[12] as Int?) ?? 0)
            }
            // In a group, your message is read once its whole audience read it (as far as this device heard).
            let isRead: Bool =
                conversation.kind == .group && sender == me
                ? count.map { $0.unreadCount == 0 && $0.readCount > 0 } ?? false : row[13]
            let kind: Message.Kind = (row[8] as Bool) ? .recallTip : groupChange != nil ? .groupChange : .message
            // Only a message that ever had a reaction has rows to read.
            let reactions = (row[24] as Int64) > 0 ? try Self.reactions(db, of: id) : (counts: [], mine: [])
            return Message(
                id: id,
                conversation: conversation,
                seq: seq,
                clientID: ClientMessageID(rawValue: row[2]),
                sender: sender,
                isOwn: sender == me,
                time: Timestamp(milliseconds: row[4]),
                type: row[15],
                body: row[5],
                status: MessageStatus.derive(
                    seq: seq,
                    isOwn: sender == me,
                    peerDelivered: delivered,
                    isRead: isRead,
                    isRecalled: row[14]
                ),
                kind: kind,
                replyTo: (row[6] as String?).map(MessageID.init(rawValue:)),
                quote: row[7],
                isReadAcked: isRead,
                needsReadReceipt: row[9],
                groupChange: groupChange.map(GroupChange.init),
                readReceiptCount: count,
                ext: Self.ext(fromJSON: row[16]),
                senderProfile: Self.profile(row, at: 17),
                editedAt: (row[23] as Int64?).map(Timestamp.init(milliseconds:)),
                reactions: reactions.counts,
                myReactions: reactions.mine
            )
        }
    }
}
