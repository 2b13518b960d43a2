// Courier — Apache-2.0
internal import Foundation
internal import GRDB
internal import CourierWire

/// What one inbound transaction changed: the caller turns it into events and delivery receipts.
struct InboundChanges: Sendable {
    /// Messages that became part of the gapless prefix of their conversation, in seq order.
    var received: [Message] = []
    var deliveries: [DeliveryUpdate] = []
    var reads: [ReadUpdate] = []
    var recalls: [RecallNotice] = []
    /// Messages an edit rewrote, as they are now.
    var edits: [Message] = []
    var reactions: [ReactionUpdate] = []
    var conversationReads: [ConversationReadUpdate] = []
    var unreadCounts: [UnreadCountUpdate] = []
    var groupReceipts: [GroupReadReceiptUpdate] = []
    var receiptRequests: [ReadReceiptRequest] = []
    /// Conversations whose unread count may have changed.
    var touched: Set<ConversationID> = []
    /// Delivery receipts due: conversation → highest seq held without gaps.
    var receiptsDue: [ConversationID: Seq] = [:]
    /// Conversations where a message arrived past a gap: sync them.
    var gaps: Set<ConversationID> = []

    mutating func merge(_ other: InboundChanges) {
        received += other.received
        deliveries += other.deliveries
        reads += other.reads
        recalls += other.recalls
        edits += other.edits
        reactions += other.reactions
        conversationReads += other.conversationReads
        unreadCounts += other.unreadCounts
        groupReceipts += other.groupReceipts
        receiptRequests += other.receiptRequests
        touched.formUnion(other.touched)
        receiptsDue.merge(other.receiptsDue) { max($0, $1) }
        gaps.formUnion(other.gaps)
    }

    var events: [CourierEvent] {
        received.map(CourierEvent.messageReceived) + deliveries.map(CourierEvent.messageDelivered)
            + recalls.map(CourierEvent.messageRecalled) + edits.map(CourierEvent.messageEdited)
            + reactions.map(CourierEvent.reactionsChanged)
            + reads.map(CourierEvent.messageRead) + conversationReads.map(CourierEvent.conversationRead)
            + unreadCounts.map(CourierEvent.unreadCountChanged)
            + groupReceipts.map(CourierEvent.groupReadReceiptsChanged)
            + receiptRequests.map(CourierEvent.readReceiptsRequested)
    }
}

extension LocalStore {
    /// Receives what a transaction changed, right after its commit and in commit order (so events are emitted in
    /// the order the store changed, whichever task applied them).
    typealias Publish = @Sendable (InboundChanges) -> Void

    /// Runs `body` in a write transaction and hands its changes to `publish` from the commit hook, with the unread
    /// counts it changed (of `me`'s, when given).
    func write(
        publishing publish: @escaping Publish,
        me: AccountID? = nil,
        _ body: @escaping @Sendable (Database) throws -> InboundChanges
    ) async throws(CourierError) {
        _ = try await write { db in
            var computed = try body(db)
            if let me { computed.unreadCounts += try Self.refreshUnreadCounts(db, computed.touched, me: me) }
            let changes = computed
            db.afterNextTransaction { _ in publish(changes) }
            return changes
        }
    }

    /// Applies one sync page: conversation states (members, last seq, peers' watermarks), then messages.
    func apply(_ ack: SyncAck, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            for state in ack.conversations {
                try Self.upsertConversation(
                    db,
                    state.id,
                    kind: state.kind,
                    members: state.members,
                    lastSeq: state.lastSeq
                )
                // A group member's log starts at the entry that added it, and a new install's at the recent entries
                // the server started it with: nothing before is owed to the device (older entries: `history`).
                if let group = state.group {
                    try Self.setRole(db, group.role, in: state.id, asOf: state.lastSeq)
                    if try Self.setGroupProfile(db, group.profile, in: state.id, asOf: state.lastSeq) {
                        changes.touched.insert(state.id)
                    }
                }
                // A state carries the account's whole view (none when absent).
                if try Self.applyView(db, state.view ?? .none, in: state.id) { changes.touched.insert(state.id) }
                let start = max(state.logStart, state.syncFrom ?? .zero)
                if start > .zero {
                    try db.execute(
                        sql: "UPDATE conversation SET syncedSeq = ?1 WHERE id = ?2 AND syncedSeq < ?1",
                        arguments: [start.rawValue, state.id.rawValue]
                    )
                }
                for receipts in state.receipts {
                    if receipts.account == me {
                        if try Self.mergeReadPosition(db, state.id, me, receipts.read, receipts.readSeqs) != nil {
                            changes.touched.insert(state.id)
                        }
                    } else {
                        changes.merge(
                            try Self.applyPeerReceipts(
                                db,
                                state.id,
                                receipts.account,
                                delivered: receipts.delivered,
                                read: receipts.read,
                                readSeqs: receipts.readSeqs,
                                me: me
                            )
                        )
                    }
                }
            }
            changes.merge(try Self.insert(db, ack.messages, me: me, excluding: nil, arrival: .offline))
            // The cursor of a completed sync is kept with what the sync brought: the next one starts where this ended,
            // and names no conversation but those that get entries outside a sync meanwhile.
            if !ack.hasMore, let since = ack.since {
                try db.execute(
                    sql: "INSERT INTO metadata (key, value) VALUES ('since', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    arguments: [since]
                )
                try db.execute(sql: "UPDATE conversation SET heldLive = 0 WHERE heldLive = 1")
            }
            return changes
        }
    }

    /// Applies live (`arrival: .online`) or history (`.roaming`) messages; a message past a gap is stored but
    /// reported in `gaps`.
    func apply(
        _ messages: [WireMessage],
        arrival: RecallNotice.Arrival,
        me: AccountID,
        then publish: @escaping Publish
    ) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            try Self.insert(db, messages, me: me, excluding: nil, arrival: arrival)
        }
    }

    /// Applies a peer's delivery watermark.
    func apply(_ event: DeliveredEvent, me: AccountID, then publish: @escaping Publish) async throws(CourierError) {
        try await write(publishing: publish, me: me) { db in
            var changes = InboundChanges()
            guard event.account != me else { return changes }
            // Kept even before the conversation's first message is stored here: it may outrun the send's ack.
            try Self.ensureConversation(db, event.conversation)
            if let update = try Self.advanceDelivered(db, event.conversation, event.account, event.watermark, me: me) {
                changes.deliveries.append(update)
            }
            return changes
        }
    }

    /// Records that a delivery receipt up to `seq` was acknowledged by the server.
    func markDeliveryAcknowledged(_ conversation: ConversationID, upTo seq: Seq) async throws(CourierError) {
        try await write { db in
            try db.execute(
                sql: "UPDATE conversation SET deliveryAckedSeq = ? WHERE id = ? AND deliveryAckedSeq < ?",
                arguments: [seq.rawValue, conversation.rawValue, seq.rawValue]
            )
        }
    }

    // MARK: Transaction bodies

    static func insert(
        _ db: Database,
        _ messages: [WireMessage],
        me: AccountID,
        excluding sentID: MessageID?,
        arrival: RecallNotice.Arrival
    ) throws
        -> InboundChanges
    {
        var touched: [ConversationID] = []
        var changes = InboundChanges()
        // Only a new entry from someone else can change this account's unread count (own messages never count).
        var unreadTouched: Set<ConversationID> = []
        for message in messages {
            if !touched.contains(message.conversation) { touched.append(message.conversation) }
            try ensureConversation(db, message.conversation)
            try db.execute(
                sql: """
                    INSERT INTO message (id, conversationId, seq, clientId, sender, time, body, replyTo, quote, recall,
                        recalled, countsUnread, needsReadReceipt, groupChange, receiptRequest, type, ext, editOf,
                        editedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """,
                arguments: [
                    message.id.rawValue, message.conversation.rawValue, message.seq.rawValue,
                    // An edit entry's body and ext live on the message it edits.
                    message.clientID.rawValue, message.sender.rawValue, message.time.rawValue,
                    message.edit == nil ? message.body : "",
                    message.replyTo?.rawValue, message.quote, try message.recall.map(Self.json),
                    message.isRecalled,
                    message.recall.map(\.countsAsUnread) ?? (message.isChatMessage && !message.isRecalled),
                    message.needsReadReceipt == true, try message.group.map(Self.json),
                    message.receiptRequest?.rawValue, message.type,
                    message.edit == nil ? Self.json(ext: message.ext) : nil, message.edit?.messageID.rawValue,
                    message.editedAt?.rawValue,
                ]
            )
            let isNew = db.changesCount > 0
            if isNew, let asked = message.receiptRequest {
                try db.execute(
                    sql: "UPDATE message SET needsReadReceipt = 1 WHERE id = ?",
                    arguments: [asked.rawValue]
                )
                if message.sender != me {
                    changes.receiptRequests.append(
                        ReadReceiptRequest(
                            conversation: message.conversation,
                            messageID: asked,
                            requester: message.sender
                        )
                    )
                }
            }
            if isNew, message.sender != me { unreadTouched.insert(message.conversation) }
            if isNew, let change = message.group, let role = change.role(of: me, sender: message.sender) {
                try Self.setRole(db, role, in: message.conversation, asOf: message.seq)
            }
            if isNew, let change = message.group, let fields = change.profile,
                change.action == .profileChanged || change.action == .created
            {
                let current = try Self.groupProfile(db, in: message.conversation)
                let profile = (current ?? GroupProfile()).applying(fields)
                _ = try Self.setGroupProfile(db, profile, in: message.conversation, asOf: message.seq)
            }
            // The entry that adds this account starts its log: what came before is not owed to it (the server's
            // `logStart`), so it is no gap to fill.
            if let change = message.group, change.action == .added, change.accounts.contains(me) {
                try db.execute(
                    sql: "UPDATE conversation SET syncedSeq = ?1 WHERE id = ?2 AND syncedSeq < ?1",
                    arguments: [message.seq.rawValue - 1, message.conversation.rawValue]
                )
            }
            try db.execute(
                sql: "UPDATE conversation SET lastSeq = max(lastSeq, ?) WHERE id = ?",
                arguments: [message.seq.rawValue, message.conversation.rawValue]
            )
            if isNew, let notice = message.recall,
                let applied = try applyRecall(db, notice, entry: message, me: me, arrival: arrival)
            {
                changes.recalls.append(applied)
            }
            if isNew, let notice = message.edit, let edited = try applyEdit(db, notice, entry: message, me: me) {
                changes.edits.append(edited)
            }
        }
        for conversation in touched {
            changes.merge(try advanceContiguity(db, conversation, me: me, excluding: sentID))
            if arrival != .offline {
                try db.execute(sql: "UPDATE conversation SET heldLive = 1 WHERE id = ? AND heldLive = 0", arguments: [conversation.rawValue])
            }
        }
        changes.touched.formUnion(unreadTouched)
        return changes
    }

    /// Moves `syncedSeq` over every message now held without a gap, and reports them.
    static func advanceContiguity(
        _ db: Database,
        _ conversation: ConversationID,
        me: AccountID,
        excluding sentID: MessageID?
    )
        throws -> InboundChanges
    {
        var changes = InboundChanges()
        let row = try Row.fetchOne(
            db,
            sql: "SELECT syncedSeq, lastSeq, deliveryAckedSeq FROM conversation WHERE id = ?",
            arguments: [conversation.rawValue]
        )!
        let start: Int64 = row[0]
        var synced = start
        while try Bool.fetchOne(
            db,
            sql: "SELECT EXISTS (SELECT 1 FROM message WHERE conversationId = ? AND seq = ?)",
            arguments: [conversation.rawValue, synced + 1]
        ) == true {
            synced += 1
        }
        if synced > start {
            try db.execute(
                sql: "UPDATE conversation SET syncedSeq = ? WHERE id = ?",
                arguments: [synced, conversation.rawValue]
            )
            let covered = try fetchMessages(db, conversation, me: me, where: "seq > ? AND seq <= ?", [start, synced])
            changes.received = covered.filter { $0.id != sentID }
            if covered.contains(where: { $0.sender != me }), synced > (row[2] as Int64) {
                changes.receiptsDue[conversation] = Seq(synced)
            }
        }
        if try highestSeq(db, conversation) > synced { changes.gaps.insert(conversation) }
        return changes
    }

    static func advanceDelivered(
        _ db: Database,
        _ conversation: ConversationID,
        _ account: AccountID,
        _ watermark: Watermark,
        me: AccountID
    ) throws -> DeliveryUpdate? {
        let old =
            try Int64.fetchOne(
                db,
                sql: "SELECT deliveredSeq FROM watermark WHERE conversationId = ? AND account = ?",
                arguments: [conversation.rawValue, account.rawValue]
            ) ?? 0
        guard watermark.seq.rawValue > old else { return nil }
        try db.execute(
            sql: """
                INSERT INTO watermark (conversationId, account, deliveredSeq, deliveredTime) VALUES (?, ?, ?, ?)
                ON CONFLICT (conversationId, account) DO UPDATE
                SET deliveredSeq = excluded.deliveredSeq, deliveredTime = excluded.deliveredTime
                WHERE watermark.deliveredSeq < excluded.deliveredSeq
                """,
            arguments: [conversation.rawValue, account.rawValue, watermark.seq.rawValue, watermark.time.rawValue]
        )
        let ids = try String.fetchAll(
            db,
            sql: "SELECT id FROM message WHERE conversationId = ? AND sender = ? AND seq > ? AND seq <= ? ORDER BY seq",
            arguments: [conversation.rawValue, me.rawValue, old, watermark.seq.rawValue]
        ).map(MessageID.init(rawValue:))
        guard !ids.isEmpty else { return nil }
        return DeliveryUpdate(conversation: conversation, account: account, watermark: watermark, messageIDs: ids)
    }

    static func conversationExists(_ db: Database, _ id: ConversationID) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?)", arguments: [id.rawValue])
            ?? false
    }

    static func ensureConversation(_ db: Database, _ id: ConversationID) throws {
        guard try !conversationExists(db, id) else { return }
        let members = id.directMembers.map { [$0.0, $0.1] } ?? []
        try upsertConversation(db, id, kind: id.kind ?? .direct, members: members, lastSeq: .zero)
    }

    static func upsertConversation(
        _ db: Database,
        _ id: ConversationID,
        kind: ConversationKind,
        members: [AccountID],
        lastSeq: Seq
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO conversation (id, kind, members, lastSeq) VALUES (?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, members = excluded.members,
                    lastSeq = max(conversation.lastSeq, excluded.lastSeq)
                """,
            arguments: [id.rawValue, kind.rawValue, members.map(\.rawValue).joined(separator: ","), lastSeq.rawValue]
        )
    }
}

extension WireGroupChange {
    /// What this entry makes `account`'s role when it changes it (`sender` made the change): `.some(nil)` when it
    /// ends its membership, `nil` when it does not concern it.
    func role(of account: AccountID, sender: AccountID) -> MemberRole?? {
        switch action {
        case .created: sender == account ? .owner : (accounts.contains(account) ? .member : nil)
        case .added: accounts.contains(account) ? .member : nil
        case .roleChanged: accounts.contains(account) ? role : nil
        case .ownerTransferred: accounts.first == account ? .owner : (sender == account ? .member : nil)
        case .removed: accounts.contains(account) ? .some(nil) : nil
        case .left: sender == account ? .some(nil) : nil
        case .dismissed: .some(nil)
        case .profileChanged: nil
        }
    }
}

extension LocalStore {
    /// Records a group's profile as of `seq` (a state's newest seq, or a `profileChanged` entry), unless what is
    /// stored is newer. Whether it changed.
    static func setGroupProfile(
        _ db: Database,
        _ profile: GroupProfile?,
        in conversation: ConversationID,
        asOf seq: Seq
    ) throws -> Bool {
        let profile = profile.flatMap { $0.isEmpty ? nil : $0 }
        guard try groupProfile(db, in: conversation) != profile else {
            try db.execute(
                sql: "UPDATE conversation SET profileSeq = ?1 WHERE id = ?2 AND profileSeq < ?1",
                arguments: [seq.rawValue, conversation.rawValue]
            )
            return false
        }
        try db.execute(
            sql: """
                UPDATE conversation SET groupName = ?1, groupAvatar = ?2, groupAnnouncement = ?3, groupExt = ?4,
                    profileSeq = ?5
                WHERE id = ?6 AND profileSeq <= ?5
                """,
            arguments: [
                profile?.name, profile?.avatar, profile?.announcement, json(ext: profile?.ext), seq.rawValue,
                conversation.rawValue,
            ]
        )
        return db.changesCount > 0
    }

    /// A group's profile as this device last heard; `nil` when none.
    static func groupProfile(_ db: Database, in conversation: ConversationID) throws -> GroupProfile? {
        guard
            let row = try Row.fetchOne(
                db,
                sql: "SELECT groupName, groupAvatar, groupAnnouncement, groupExt FROM conversation WHERE id = ?",
                arguments: [conversation.rawValue]
            )
        else { return nil }
        return groupProfile(row, at: 0)
    }

    /// A group's profile from `groupName, groupAvatar, groupAnnouncement, groupExt` at `column`; `nil` when none.
    static func groupProfile(_ row: Row, at column: Int) -> GroupProfile? {
        let profile = GroupProfile(
            name: row[column],
            avatar: row[column + 1],
            announcement: row[column + 2],
            ext: ext(fromJSON: row[column + 3])
        )
        return profile.isEmpty ? nil : profile
    }

    /// Records this account's role in a group as of `seq`, unless what is stored is as new.
    /// `nil`: no longer a member.
    static func setRole(_ db: Database, _ role: MemberRole?, in conversation: ConversationID, asOf seq: Seq) throws {
        try db.execute(
            sql: "UPDATE conversation SET role = ?, roleSeq = ? WHERE id = ? AND roleSeq <= ?",
            arguments: [role?.rawValue, seq.rawValue, conversation.rawValue, seq.rawValue]
        )
    }

    /// This account's role in a group, as this device last heard; `nil` when it never heard (or in a direct
    /// conversation).
    func role(in conversation: ConversationID) async throws(CourierError) -> MemberRole? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT role FROM conversation WHERE id = ?", arguments: [conversation.rawValue])
                .flatMap(MemberRole.init(rawValue:))
        }
    }

    /// A message's `ext` as stored and as the wire carries it (a JSON object of strings, keys sorted), `nil` for none.
    static func json(ext: [String: String]?) -> String? {
        guard let ext, !ext.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(ext)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A stored `ext` read back (`nil` for none).
    static func ext(fromJSON text: String?) -> [String: String]? {
        text.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
    }

    /// A recall notice or group change as stored.
    static func json(_ value: some Encodable) throws -> String {
        String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    /// Delivery receipts owed from an earlier connection: conversations held further than acknowledged, where a
    /// peer's message is in between.
    func dueDeliveryReceipts(me: AccountID) async throws(CourierError) -> [ConversationID: Seq] {
        try await read { db in
            var due: [ConversationID: Seq] = [:]
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT c.id, c.syncedSeq FROM conversation c
                    WHERE c.syncedSeq > c.deliveryAckedSeq AND EXISTS (
                        SELECT 1 FROM message m WHERE m.conversationId = c.id AND m.sender != ?
                        AND m.seq > c.deliveryAckedSeq AND m.seq <= c.syncedSeq)
                    """,
                arguments: [me.rawValue]
            )
            for row in rows { due[ConversationID(rawValue: row[0])] = Seq(row[1] as Int64) }
            return due
        }
    }
}
