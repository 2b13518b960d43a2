// Courier — Apache-2.0
public import CourierWire
internal import Foundation
#if canImport(Glibc)
internal import Glibc
#endif

/// Webhooks to the app's backend (SPEC §7, docs/webhooks.md). An event is recorded in the transaction of the change it
/// reports, as one pending delivery per endpoint that wants it: a crash loses none, a rolled-back change emits none.
/// Each node's dispatcher then delivers them, oldest first per endpoint and conversation.
public protocol WebhookStore: Sendable {
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
    /// Leases, until `leaseUntil`, the due head of up to `limit` queues (an endpoint and a conversation) and, after
    /// each head, up to `runLength - 1` more of that queue's pending deliveries that are due and free, in order and
    /// without a gap: a run that one attempt sequence delivers in order. At most `slots` runs start for one endpoint
    /// (see ``WebhookSlots``). Several nodes never lease the same delivery. Answers them in `seq` order.
    func claimWebhookDeliveries(
        now: Timestamp,
        leaseUntil: Timestamp,
        limit: Int,
        runLength: Int,
        slots: WebhookSlots
    ) async throws(StorageError) -> [WebhookDelivery]
    /// Records attempts' outcomes in one transaction: delivered, retried later, failed for good, or released
    /// unattempted. Each is dropped if its delivery is no longer held under the lease it names.
    func recordWebhookAttempts(_ attempts: [WebhookAttempt]) async throws(StorageError)
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
    /// A page of an endpoint's deliveries, newest first, after `cursor` (a delivery's `seq`).
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
    /// At a node's start: frees the leases of attempts that a process which died left behind, when the store knows
    /// that no other process can hold them (SQLite: one process per file). Elsewhere leases simply run out.
    func releaseAbandonedWebhookLeases() async throws(StorageError)
    /// How many deliveries wait, across endpoints (the backlog).
    func pendingWebhookDeliveries() async throws(StorageError) -> Int
    /// Deletes up to `limit` deliveries that are done with: delivered before `cutoff`, or failed with their last attempt
    /// due before it. Pending ones are never deleted. Answers how many.
    func pruneWebhookDeliveries(before cutoff: Timestamp, limit: Int) async throws(StorageError) -> Int
}

/// How many runs a claim may start per endpoint: `free` for endpoints with runs under way, `perEndpoint` for the others.
public struct WebhookSlots: Hashable, Sendable {
    public let perEndpoint: Int
    public let free: [String: Int]

    public init(perEndpoint: Int, free: [String: Int] = [:]) {
        self.perEndpoint = perEndpoint
        self.free = free
    }

    /// Endpoints that may start none.
    public var full: [String] { free.filter { $0.value <= 0 }.map(\.key).sorted() }

    /// The queue heads to lease, oldest first: at most `limit`, and at most the endpoint's slots per endpoint.
    public func pick(_ heads: [(seq: Int64, endpoint: String)], limit: Int) -> [Int64] {
        var taken: [String: Int] = [:]
        var picked: [Int64] = []
        for head in heads.sorted(by: { $0.seq < $1.seq }) where picked.count < limit {
            let room = free[head.endpoint] ?? perEndpoint
            guard taken[head.endpoint, default: 0] < room else { continue }
            taken[head.endpoint, default: 0] += 1
            picked.append(head.seq)
        }
        return picked
    }
}

/// An account to notify of a message it has not received, and where.
public struct PushRecipient: Hashable, Sendable, Codable {
    public let account: AccountID
    /// Its devices' push tokens (none when it registered none).
    public let tokens: [PushToken]

    enum CodingKeys: String, CodingKey {
        case account
        case tokens = "pushTokens"
    }
    public init(account: AccountID, tokens: [PushToken]) {
        self.account = account
        self.tokens = tokens
    }
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

    public init(
        id: String,
        url: String,
        events: [WebhookEventType]?,
        secret: String,
        previousSecret: String? = nil,
        previousSecretExpiresAt: Timestamp? = nil,
        createdAt: Timestamp
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.secret = secret
        self.previousSecret = previousSecret
        self.previousSecretExpiresAt = previousSecretExpiresAt
        self.createdAt = createdAt
    }

    /// The secrets that sign a delivery sent at `now`: the current one, and the previous one during the overlap.
    public func signingSecrets(at now: Timestamp) -> [String] {
        guard let previousSecret, let until = previousSecretExpiresAt, now < until else { return [secret] }
        return [secret, previousSecret]
    }

    /// The stored form of `events`: `*` for all, else the types joined by commas.
    public var eventFilter: String { events.map { $0.map(\.rawValue).joined(separator: ",") } ?? "*" }

    public static func events(fromFilter filter: String) -> [WebhookEventType]? {
        filter == "*" ? nil : filter.split(separator: ",").map { WebhookEventType(rawValue: String($0)) }
    }
}

/// What an event reports.
public struct WebhookEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A message was appended (NIM 抄送 of a message, Agora `chat` callback).
    public static let messageCreated = WebhookEventType(rawValue: "message.created")
    /// A member's delivery watermark moved.
    public static let messageDelivered = WebhookEventType(rawValue: "message.delivered")
    /// A member read up to a message (direct), or newly read messages that asked for receipts (group, with counts).
    public static let messageRead = WebhookEventType(rawValue: "message.read")
    /// A message was recalled (NIM 抄送 of a recall, Agora `recall` callback).
    public static let messageRecalled = WebhookEventType(rawValue: "message.recalled")
    /// A group was created or its membership or roles changed.
    public static let groupChanged = WebhookEventType(rawValue: "group.changed")
    /// A sender asked a group for read receipts after sending.
    public static let readReceiptsRequested = WebhookEventType(rawValue: "readReceipts.requested")
    /// Some of a message's recipients (or of a recall's) have it on no device a moment after it was sent: the push
    /// recipe's event (docs/webhooks.md). Not recorded for an endpoint that does not name it (`*` excludes it).
    public static let messageUndelivered = WebhookEventType(rawValue: "message.undelivered")

    /// The types `*` stands for.
    public static let all: [WebhookEventType] = [
        .messageCreated, .messageDelivered, .messageRead, .messageRecalled, .groupChanged, .readReceiptsRequested,
    ]

    /// The queue of `message.undelivered` events of a conversation (`push:` and its id): apart from its other events,
    /// so that their waits hold nothing else back.
    public static func pushQueue(of conversation: ConversationID) -> ConversationID {
        ConversationID(rawValue: "push:" + conversation.rawValue)
    }
}

/// An event to record with the change it reports.
public struct WebhookEventDraft: Hashable, Sendable {
    /// `webhook-id`: the same for every endpoint and every retry, so receivers de-duplicate.
    public let id: String
    public let type: WebhookEventType
    public let conversation: ConversationID
    public let time: Timestamp
    /// The JSON body sent: `{"type", "timestamp", "data"}`.
    public let payload: String
}

/// One event on its way to one endpoint.
public struct WebhookDelivery: Hashable, Sendable {
    public enum State: String, Hashable, Sendable, Codable {
        case pending, delivered, failed
    }
    /// Its place in the global order of recorded deliveries.
    public let seq: Int64
    public let endpointID: String
    public let eventID: String
    public let type: WebhookEventType
    public let conversation: ConversationID
    public let createdAt: Timestamp
    public let payload: String
    public let state: State
    public let attempts: Int
    public let nextAttemptAt: Timestamp
    /// Retries stop after this time (`nil`: the server's retry period after `createdAt`); the delivery is then
    /// failed, and retryable through the API.
    public let expiresAt: Timestamp?
    public let lastStatus: Int?
    public let lastError: String?
    public let deliveredAt: Timestamp?

    public init(
        seq: Int64,
        endpointID: String,
        eventID: String,
        type: WebhookEventType,
        conversation: ConversationID,
        createdAt: Timestamp,
        payload: String,
        state: State,
        attempts: Int,
        nextAttemptAt: Timestamp,
        expiresAt: Timestamp?,
        lastStatus: Int?,
        lastError: String?,
        deliveredAt: Timestamp?
    ) {
        self.seq = seq
        self.endpointID = endpointID
        self.eventID = eventID
        self.type = type
        self.conversation = conversation
        self.createdAt = createdAt
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.expiresAt = expiresAt
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.deliveredAt = deliveredAt
    }
}

/// The outcome of one delivery attempt.
public struct WebhookAttempt: Hashable, Sendable {
    public enum Outcome: Hashable, Sendable {
        case delivered
        /// Try again at this time.
        case retry(at: Timestamp)
        /// The retry period is over.
        case failed
        /// Not attempted (a run stopped before it): free again, its attempt count unchanged.
        case released
        /// Not attempted yet, on purpose: due again at this time, its attempt count unchanged (a
        /// `message.undelivered` event waits until its message is a moment old).
        case deferred(until: Timestamp)
    }
    public let seq: Int64
    /// The lease the attempt ran under: an outcome recorded after another claim took the delivery over is dropped.
    public let lease: Timestamp
    public let outcome: Outcome
    public let status: Int?
    public let error: String?
    public let at: Timestamp

    public init(seq: Int64, lease: Timestamp, outcome: Outcome, status: Int?, error: String?, at: Timestamp) {
        self.seq = seq
        self.lease = lease
        self.outcome = outcome
        self.status = status
        self.error = error
        self.at = at
    }
}

/// When to try a failed delivery again: exponential from 5 s, capped at an hour, with full jitter, until the retry
/// period (24 h by default) is over.
public struct WebhookRetryPolicy: Hashable, Sendable {
    public let period: Duration
    public let initial: Duration
    public let maximum: Duration

    public init(period: Duration = .seconds(86_400), initial: Duration = .seconds(5), maximum: Duration = .seconds(3600)) {
        self.period = period
        self.initial = initial
        self.maximum = maximum
    }

    /// The next attempt after `attempts` failed ones, or `nil` once past `expiresAt`.
    public func nextAttempt(
        after attempts: Int,
        now: Timestamp,
        expiresAt: Timestamp,
        random: Double = Double.random(in: 0.5...1)
    ) -> Timestamp? {
        let base = Self.seconds(initial) * pow(2, Double(min(max(0, attempts - 1), 40)))
        let delay = min(base, Self.seconds(maximum)) * random
        let next = Timestamp(milliseconds: now.rawValue + Int64(delay * 1000))
        return next <= expiresAt ? next : nil
    }

    public func expiry(from now: Timestamp) -> Timestamp {
        Timestamp(milliseconds: now.rawValue + Int64(Self.seconds(period) * 1000))
    }

    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// The events a change causes: pure functions of what the store computed in the transaction (sans I/O), so both
/// backends record the same events for the same change.
public enum WebhookEvents {
    /// The event of a new log entry: a message, a recall, a group change or a late ask for receipts. None for a
    /// duplicate (the original was reported).
    public static func entry(_ result: AppendResult) -> [WebhookEventDraft] {
        guard let event = created(result) else { return [] }
        let message = result.message
        // A message or a recall that someone may lack: in the push queue, written as `{"message": …}` only (the
        // recipients are added when it is delivered).
        guard message.isChatMessage || message.recall != nil else { return [event] }
        var data = JSONTextWriter()
        data.raw("{\"message\":")
        data.message(message)
        data.raw("}")
        return [
            event,
            WebhookEventDraft(
                id: eventID(),
                type: .messageUndelivered,
                conversation: WebhookEventType.pushQueue(of: message.conversation),
                time: message.time,
                payload: data.text
            ),
        ]
    }

    static func created(_ result: AppendResult) -> WebhookEventDraft? {
        guard !result.isDuplicate else { return nil }
        let message = result.message
        let type: WebhookEventType =
            if message.recall != nil { .messageRecalled }
            else if message.group != nil { .groupChanged }
            else if message.receiptRequest != nil { .readReceiptsRequested }
            else { .messageCreated }
        // Hand-written JSON (this runs in the writer's transaction, once per message): the frames' writer.
        return draft(type, message.conversation, message.time) { json in
            json.raw("{\"message\":")
            json.message(message)
            json.raw("}")
        }
    }

    /// The event of a read: what the read shared (the reader's receipts), and in a group the messages that asked
    /// for receipts which it newly covers, with their counts. None for a private read or one that moved nothing
    /// shared: the reader asked that nobody learn of it.
    public static func read(_ mark: ResolvedRead, _ change: ReadChange) -> WebhookEventDraft? {
        guard change.shared != nil || !change.receipts.isEmpty else { return nil }
        return draft(.messageRead, mark.conversation, mark.time) { json in
            json.raw("{\"conversation\":")
            json.string(mark.conversation.rawValue)
            if let shared = change.shared {
                json.raw(",\"read\":")
                json.watermark(shared.read)
                if !shared.readSeqs.isEmpty {
                    json.raw(",\"readSeqs\":")
                    json.seqs(shared.readSeqs)
                }
            }
            json.raw(",\"reader\":")
            json.string(mark.reader.rawValue)
            if !change.receipts.isEmpty {
                json.raw(",\"receipts\":[")
                for (index, receipt) in change.receipts.enumerated() {
                    if index > 0 { json.raw(",") }
                    json.raw("{\"messageId\":")
                    json.string(receipt.tally.messageID.rawValue)
                    json.raw(",\"readCount\":\(receipt.tally.readCount),\"seq\":\(receipt.seq.rawValue)")
                    json.raw(",\"unreadCount\":\(receipt.tally.unreadCount)}")
                }
                json.raw("]")
            }
            json.raw("}")
        }
    }

    /// The event of a delivery watermark that moved.
    public static func delivered(
        _ account: AccountID,
        in conversation: ConversationID,
        _ change: WatermarkChange,
        at time: Timestamp
    ) -> WebhookEventDraft? {
        guard change.advanced else { return nil }
        return draft(.messageDelivered, conversation, time) { json in
            json.raw("{\"account\":")
            json.string(account.rawValue)
            json.raw(",\"conversation\":")
            json.string(conversation.rawValue)
            json.raw(",\"delivered\":")
            json.watermark(change.watermark)
            json.raw("}")
        }
    }

    /// Who is never notified of `message` as a recipient: its sender's account (a recall's operator), and for a
    /// one-way recall the recalled message's sender too (their account keeps the message).
    public static func pushExclusions(for message: WireMessage) -> [AccountID] {
        var excluded: Set<AccountID> = [message.sender]
        if let recall = message.recall {
            excluded.insert(recall.recalledBy)
            if recall.mode == .oneWay { excluded.insert(recall.sender) }
        }
        return excluded.sorted { $0.rawValue < $1.rawValue }
    }

    /// The body of a `message.undelivered` delivery: its stored `{"message": …}` with the recipients added, and the
    /// cursor of the rest when there are more.
    public static func undeliveredPayload(
        stored: String,
        createdAt: Timestamp,
        recipients: [PushRecipient],
        nextCursor: AccountID?
    ) -> String {
        var json = JSONTextWriter()
        json.raw("{\"data\":")
        json.raw(String(stored.dropLast()))
        if let nextCursor {
            json.raw(",\"nextCursor\":")
            json.string(nextCursor.rawValue)
        }
        json.raw(",\"recipients\":")
        pushRecipients(recipients, into: &json)
        json.raw("},\"timestamp\":\"\(iso8601(createdAt))\",\"type\":\"message.undelivered\"}")
        return json.text
    }

    /// `[{"account", "pushTokens": [{"device", "platform", "sandbox", "token", "updatedAt"}]}]`.
    public static func pushRecipients(_ recipients: [PushRecipient], into json: inout JSONTextWriter) {
        json.raw("[")
        for (index, recipient) in recipients.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw("{\"account\":")
            json.string(recipient.account.rawValue)
            json.raw(",\"pushTokens\":[")
            for (index, token) in recipient.tokens.enumerated() {
                if index > 0 { json.raw(",") }
                json.raw("{\"device\":")
                json.string(token.device.rawValue)
                json.raw(",\"platform\":")
                json.string(token.platform.rawValue)
                json.raw(",\"sandbox\":\(token.sandbox),\"token\":")
                json.string(token.token)
                json.raw(",\"updatedAt\":\(token.updatedAt.rawValue)}")
            }
            json.raw("]}")
        }
        json.raw("]")
    }

    /// The envelope `{"data", "timestamp", "type"}` around what `data` writes.
    static func draft(
        _ type: WebhookEventType,
        _ conversation: ConversationID,
        _ time: Timestamp,
        data: (inout JSONTextWriter) -> Void
    ) -> WebhookEventDraft {
        var json = JSONTextWriter()
        json.raw("{\"data\":")
        data(&json)
        json.raw(",\"timestamp\":\"\(iso8601(time))\",\"type\":")
        json.string(type.rawValue)
        json.raw("}")
        return WebhookEventDraft(id: eventID(), type: type, conversation: conversation, time: time, payload: json.text)
    }

    /// `evt_` and 32 random hex digits.
    static func eventID() -> String {
        var generator = SystemRandomNumberGenerator()
        let (high, low) = (generator.next() as UInt64, generator.next() as UInt64)
        func hex(_ value: UInt64) -> String {
            let text = String(value, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }
        return "evt_" + hex(high) + hex(low)
    }

    /// `2026-11-24T12:55:14.147Z` (no formatter object: this runs in the writer's transaction).
    static func iso8601(_ time: Timestamp) -> String {
        var seconds = time_t(time.rawValue / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let milliseconds = Int32(((time.rawValue % 1000) + 1000) % 1000)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(milliseconds, 3))Z"
    }
}
