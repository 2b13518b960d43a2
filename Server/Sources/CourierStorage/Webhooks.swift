// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Webhooks to the app's backend (SPEC §7, docs/webhooks.md, ADRs 0030 and 0059). An event is written once to the event
/// log, in the transaction of the change it reports: a crash loses none, a rolled-back change emits none. Each
/// endpoint's stream reads the log from its cursor under a lease; an event it could not deliver at once is kept as a
/// delivery of its own (parked), holds back the later events of its conversation, and is retried by the same stream
/// under the same lease.
public protocol WebhookStore: Sendable {
    /// Leases an endpoint's stream (its log from its cursor) until `until`, unless it is paused or another node
    /// holds it (this node renews its own lease by naming it, `held`): the endpoint as it is now and its cursor, or
    /// `nil`.
    func leaseWebhookStream(
        of endpoint: String,
        now: Timestamp,
        until: Timestamp,
        held: Timestamp?
    ) async throws(StorageError) -> WebhookStream?
    /// Up to `limit` events after `cursor`, in log order, and no more than `maxBytes` of payload after the first: only
    /// committed ones, and none will ever be written before the last of them.
    func webhookEvents(after cursor: WebhookCursor, limit: Int, maxBytes: Int) async throws(StorageError) -> [WebhookEvent]
    /// Which of `conversations` (queues) have deliveries of the endpoint waiting: their next events wait behind them.
    func parkedWebhookQueues(
        of endpoint: String,
        among conversations: [ConversationID]
    ) async throws(StorageError) -> Set<ConversationID>
    /// The endpoint's parked deliveries that are due at `now`, as runs to deliver in order: the head of each of its
    /// queues (a conversation) that is due, the longest-waiting first, at most `limit`, each followed by up to
    /// `runLength - 1` more of its queue that are due, without a gap. And when to look again: now when more runs are
    /// due than `limit`, else when the first head that is not due yet comes due (`nil`: nothing is parked).
    /// Only the node that holds the endpoint's stream asks (its lease keeps every other node off the endpoint).
    func dueWebhookDeliveries(
        of endpoint: String,
        now: Timestamp,
        limit: Int,
        runLength: Int
    ) async throws(StorageError) -> (runs: [[WebhookDelivery]], next: Timestamp?)
    /// Moves the stream's cursor to `cursor`, writes `parking` and records `attempts` (of parked deliveries), in one
    /// transaction, if it is still leased under `lease`, and leaves it leased until `leaseAfter` (0: free); `false`
    /// when another node took it over (what this one sent were repeats, and nothing is written). `answeredAt`: the
    /// endpoint accepted a delivery then, so its deliveries waiting out a backoff are due (those that `attempts`
    /// schedules keep theirs). `parking` is in the log's order: it becomes each queue's order (`seq`).
    func advanceWebhookStream(
        of endpoint: String,
        lease: Timestamp,
        to cursor: WebhookCursor,
        parking: [WebhookParking],
        attempts: [WebhookAttempt],
        answeredAt: Timestamp?,
        leaseAfter: Timestamp
    ) async throws(StorageError) -> Bool

    /// Adds an endpoint; events committed from now on are delivered to it.
    func createWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws(StorageError)
    /// Every endpoint, oldest first.
    func webhookEndpoints() async throws(StorageError) -> [WebhookEndpoint]
    func webhookEndpoint(_ id: String) async throws(StorageError) -> WebhookEndpoint?
    /// Replaces an endpoint's secret, keeping the previous one valid until `previousValidUntil` (both sign meanwhile).
    func rotateWebhookSecret(
        of id: String,
        to secret: String,
        previousValidUntil: Timestamp
    ) async throws(StorageError) -> WebhookEndpoint?
    /// Removes an endpoint and its deliveries. `false` when there was none.
    func deleteWebhookEndpoint(_ id: String) async throws(StorageError) -> Bool
    /// Changes an endpoint's URL, the event types it receives (`events`: `.some(nil)` for all) and its `batch`, each
    /// when given.
    /// Deliveries already recorded keep going to it. `nil` when there is no such endpoint.
    func updateWebhookEndpoint(
        _ id: String,
        url: String?,
        events: [WebhookEventType]??,
        batch: Int?
    ) async throws(StorageError) -> WebhookEndpoint?
    /// Pauses an endpoint at `time` (`nil` resumes it): a paused endpoint's deliveries are recorded as usual and wait,
    /// unattempted, until it is resumed. `nil` when there is no such endpoint.
    func pauseWebhookEndpoint(_ id: String, at time: Timestamp?) async throws(StorageError) -> WebhookEndpoint?
    /// The members of `conversation` who should have `seq` (its audience: members when it was sent, but none of
    /// `excluding`: its sender's account …) and have it on none of their devices (delivery watermark and own read below it), in
    /// account order after `cursor`, with their push tokens: whom to notify for `message.undelivered`.
    func undeliveredRecipients(
        in conversation: ConversationID,
        seq: Seq,
        excluding: [AccountID],
        after cursor: AccountID?,
        limit: Int
    ) async throws(StorageError) -> [PushRecipient]
    /// A page of an endpoint's deliveries, newest first, below `cursor` (a delivery's `position`): its parked ones,
    /// and the log's events it wants since it was added (delivered at once behind its cursor, pending ahead of it).
    func webhookDeliveries(
        of endpoint: String,
        state: WebhookDelivery.State?,
        before cursor: Int64?,
        limit: Int
    ) async throws(StorageError) -> [WebhookDelivery]
    /// Makes failed deliveries pending again, due now, with a new retry period: one (`seq`) or all of the endpoint's.
    /// Answers how many.
    func retryWebhookDeliveries(
        of endpoint: String,
        seq: Int64?,
        now: Timestamp,
        expiresAt: Timestamp
    ) async throws(StorageError) -> Int
    /// At a node's start: frees the streams' leases that a process which died left behind, when the store knows that
    /// no other process can hold them (SQLite: one process per file). Elsewhere leases simply run out.
    func releaseAbandonedWebhookLeases() async throws(StorageError)
    /// How many deliveries wait, across endpoints (the backlog): parked, and in the log ahead of each cursor.
    func pendingWebhookDeliveries() async throws(StorageError) -> Int
    /// Deletes up to `limit` deliveries that are done with: delivered before `cutoff`, or failed with their last attempt
    /// due before it, and the log's events older than `cutoff` that every endpoint has passed. Pending ones are never
    /// deleted. Answers how many.
    func pruneWebhookDeliveries(before cutoff: Timestamp, limit: Int) async throws(StorageError) -> Int
}

/// An endpoint of the app's backend that receives events, signed with its own secret.
public struct WebhookEndpoint: Hashable, Sendable {
    public let id: String
    public let url: String
    /// The event types it receives; `nil` for all.
    public let events: [WebhookEventType]?
    /// `whsec_` and the base64 of the key (Standard Webhooks).
    public let secret: String
    /// The secret it had before a rotation, still signing until `previousSecretExpiresAt`.
    public let previousSecret: String?
    public let previousSecretExpiresAt: Timestamp?
    public let createdAt: Timestamp
    /// When it was paused: its deliveries are recorded and wait, unattempted, until it is resumed. `nil`: active.
    public let pausedAt: Timestamp?
    /// Up to this many events of one conversation in one request, as a JSON array (ADR 0041); 0: one event
    /// per request, its body the event itself.
    public let batch: Int

    /// The largest `batch` an endpoint may ask for.
    public static let maxBatch = 100

    public init(
        id: String,
        url: String,
        events: [WebhookEventType]?,
        secret: String,
        previousSecret: String? = nil,
        previousSecretExpiresAt: Timestamp? = nil,
        createdAt: Timestamp,
        pausedAt: Timestamp? = nil,
        batch: Int = 0
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.secret = secret
        self.previousSecret = previousSecret
        self.previousSecretExpiresAt = previousSecretExpiresAt
        self.createdAt = createdAt
        self.pausedAt = pausedAt
        self.batch = batch
    }

    /// The secrets that sign a delivery sent at `now`: the current one, and the previous one during the overlap.
    public func signingSecrets(at now: Timestamp) -> [String] {
        guard let previousSecret, let until = previousSecretExpiresAt, now < until else { return [secret] }
        return [secret, previousSecret]
    }

    /// The stored form of `events`: `*` for all, else the types joined by commas.
    public static func filter(of events: [WebhookEventType]?) -> String {
        events.map { $0.map(\.rawValue).joined(separator: ",") } ?? "*"
    }

    public static func events(fromFilter filter: String) -> [WebhookEventType]? {
        filter == "*" ? nil : filter.split(separator: ",").map { WebhookEventType(rawValue: String($0)) }
    }
}
