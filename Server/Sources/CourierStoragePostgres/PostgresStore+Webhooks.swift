// Courier — Apache-2.0
public import CourierStorage
internal import CourierSQL
public import CourierDomain

/// The webhook store is written once for both backends (CourierSQL's `WebhookLog+SQL.swift` and
/// `WebhookStore+SQL.swift`); what is PostgreSQL's own is here.
extension PostgresStore: WebhookStore {
    /// Other nodes may be mid-cycle: their streams' leases run out on their own.
    public func releaseAbandonedWebhookLeases() async throws(StorageError) {}
}
