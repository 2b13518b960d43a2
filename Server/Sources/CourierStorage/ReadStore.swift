// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// Read receipts, unread counts and read privacy (SPEC §4, §7).
///
/// Per (conversation, reader) the store keeps two reading positions in the `receipt` row — the reader's own (every
/// read, private ones included: it drives the unread count) and the shared one (what peers see) — plus the few
/// messages above each watermark that were read one by one. A read costs O(1) rows; in-order reading adds none.
public protocol ReadStore: Sendable {
    /// Applies a read receipt in one transaction. Watermarks only move forward; a stale or repeated read changes
    /// nothing and returns the current state.
    ///
    /// - Throws: `.conversationNotFound`; `.seqBeyondLastMessage` for an `upTo` past the newest message.
    ///
    /// `whenQueued`, if given, is called once the read has its place in the store's commit order (joined a waiting
    /// write of the same reader, or queued one), so a read after it from the same device can start without waiting
    /// for this one's commit (a device that reads each message as it arrives). A store that cannot say
    /// never calls it; the caller then waits for the answer.
    func markRead(_ read: ResolvedRead, whenQueued: (@Sendable () -> Void)?) async throws(StorageError) -> ReadOutcome
    /// Applies several read receipts (each as ``markRead(_:)`` would) in one transaction: all of them or none.
    /// Returns one change per read, in order.
    ///
    /// - Throws: as ``markRead(_:)``, for the first read that fails; nothing is then written.
    func markReads(_ reads: [ResolvedRead]) async throws(StorageError) -> [ReadOutcome]
    /// The reader's own state in one conversation.
    func readState(of reader: AccountID, in conversation: ConversationID) async throws(StorageError) -> ReadState
    /// Unread counts of every conversation of `account` that has unread messages.
    func unreadCounts(of account: AccountID) async throws(StorageError) -> [ConversationID: Int]
    /// The account's read-receipt settings (absent ones are `true`).
    func readReceiptSettings(of account: AccountID) async throws(StorageError) -> StoredReadReceiptSettings
    /// The read-receipt settings of several accounts as far as they concern `conversation` (their account-wide
    /// setting and the one for `conversation`); accounts with neither are left out (their settings are `true`).
    func readReceiptSettings(
        of accounts: [AccountID],
        in conversation: ConversationID
    ) async throws(StorageError) -> [AccountID: StoredReadReceiptSettings]
    /// Sets whether `account` shares reads, account-wide (`conversation == nil`) or in one conversation.
    func setSendReadReceipts(
        _ value: Bool,
        for account: AccountID,
        in conversation: ConversationID?
    ) async throws(StorageError)
}

/// An account's stored read-receipt settings.
public struct StoredReadReceiptSettings: Hashable, Sendable {
    public let sendReadReceipts: Bool
    public let conversations: [ConversationID: Bool]
    public init(sendReadReceipts: Bool, conversations: [ConversationID: Bool]) {
        self.sendReadReceipts = sendReadReceipts
        self.conversations = conversations
    }

    /// Settings from `read_setting` rows (account, conversation id or `""` for account-wide, value).
    public static func grouped(
        _ rows: [(account: AccountID, conversation: String, value: Bool)]
    ) -> [AccountID: StoredReadReceiptSettings] {
        Dictionary(grouping: rows, by: \.account).mapValues { rows in
            var global = true
            var conversations: [ConversationID: Bool] = [:]
            for row in rows {
                if row.conversation.isEmpty {
                    global = row.value
                } else {
                    conversations[ConversationID(rawValue: row.conversation)] = row.value
                }
            }
            return StoredReadReceiptSettings(sendReadReceipts: global, conversations: conversations)
        }
    }
}

extension ReadStore {
    /// ``markRead(_:whenQueued:)`` with no one to tell of its place.
    public func markRead(_ read: ResolvedRead) async throws(StorageError) -> ReadOutcome {
        try await markRead(read, whenQueued: nil)
    }
}
