// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

/// Groups on PostgreSQL: the schema is migrated (version 4), the operations are not ported yet — each answers
/// `unavailable` with a sentence saying so, and the server refuses group requests on this backend (see
/// docs/decisions/0008-group-receipts.md).
extension PostgresStore: GroupStore {
    static let groupsPending = StorageError.unavailable("groups are not available on the PostgreSQL backend yet")

    public func createGroup(_ entry: MessageDraft, members: [AccountID]) async throws(StorageError) -> AppendResult {
        throw Self.groupsPending
    }

    public func changeGroup(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        throw Self.groupsPending
    }

    public func member(_ account: AccountID, of group: ConversationID) async throws(StorageError) -> GroupMember? {
        throw Self.groupsPending
    }

    public func groupExists(_ group: ConversationID) async throws(StorageError) -> Bool {
        throw Self.groupsPending
    }

    public func members(
        of group: ConversationID,
        after: AccountID?,
        limit: Int
    ) async throws(StorageError) -> (members: [GroupMember], total: Int) {
        throw Self.groupsPending
    }

    public func memberAccounts(of group: ConversationID) async throws(StorageError) -> [AccountID] {
        throw Self.groupsPending
    }

    public func requestReadReceipts(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        throw Self.groupsPending
    }

    public func receiptCounts(
        in group: ConversationID,
        seqs: [Seq]
    ) async throws(StorageError) -> [Seq: ReceiptTally] {
        throw Self.groupsPending
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        throw Self.groupsPending
    }
}
