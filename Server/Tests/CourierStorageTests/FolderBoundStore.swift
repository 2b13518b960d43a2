// Courier — Apache-2.0
import CourierStorage
import CourierTestSupport
import CourierWire

/// A store that keeps its temporary folder alive as long as it is used.
struct FolderBoundStore: AccountStore, MessageStore, ConversationStore, ReceiptStore {
    let store: any CourierStore
    let folder: TemporaryFolder

    func registerAccount(_ account: AccountID, at time: Timestamp) async throws(StorageError) {
        try await store.registerAccount(account, at: time)
    }
    func accountExists(_ account: AccountID) async throws(StorageError) -> Bool {
        try await store.accountExists(account)
    }
    func append(_ draft: MessageDraft) async throws(StorageError) -> AppendResult { try await store.append(draft) }
    func messages(
        in conversation: ConversationID,
        after seq: Seq,
        limit: Int
    ) async throws(StorageError) -> [WireMessage] {
        try await store.messages(in: conversation, after: seq, limit: limit)
    }
    func messages(
        in conversation: ConversationID,
        before seq: Seq?,
        limit: Int
    ) async throws(StorageError) -> [WireMessage] {
        try await store.messages(in: conversation, before: seq, limit: limit)
    }
    func message(_ id: MessageID) async throws(StorageError) -> WireMessage? { try await store.message(id) }
    func conversations(of account: AccountID) async throws(StorageError) -> [ConversationState] {
        try await store.conversations(of: account)
    }
    func conversation(_ id: ConversationID) async throws(StorageError) -> ConversationState? {
        try await store.conversation(id)
    }
    func advanceDelivered(
        _ account: AccountID,
        in conversation: ConversationID,
        to seq: Seq
    ) async throws(StorageError)
        -> WatermarkChange
    {
        try await store.advanceDelivered(account, in: conversation, to: seq)
    }
}
