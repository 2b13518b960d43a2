// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import CourierWire
internal import GRDB

extension SQLiteStore: WebhookStore {
    /// Writes the webhook events of `change` to the log in the caller's transaction (ADR 0030), each once, when an
    /// endpoint wants its type (built only when some endpoint exists: without endpoints a change pays one lookup in
    /// an empty table).
    static func announce(_ db: Database, _ change: Change?) throws {
        guard let change else { return }
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM webhook_endpoint)")) == true
        else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO webhook_event (stamp, event_id, type, conversation_id, message_id, created_at, payload)
                SELECT change_stamp(), ?, ?, ?, ?, ?, ?
                WHERE EXISTS (SELECT 1 FROM webhook_endpoint WHERE \(WebhookEndpoint.wants("?")))
                """
        )
        for event in change.webhookEvents {
            try insert.execute(arguments: [
                event.id, event.type.rawValue, event.conversation.rawValue, event.messageID?.rawValue,
                event.time.rawValue, event.payload, event.type.rawValue, event.type.rawValue,
            ])
        }
    }

    /// One process opens the file: a lease found at start is one a killed process held.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {
        try await write { db in
            try db.execute(sql: "UPDATE webhook_endpoint SET cursor_lease_until = 0 WHERE cursor_lease_until <> 0")
        }
    }
}
