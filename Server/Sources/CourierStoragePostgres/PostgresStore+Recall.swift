// Courier — Apache-2.0
public import CourierStorage
public import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func recall(_ entry: MessageDraft) async throws(StorageError) -> AppendResult {
        try await append(entry)
    }

}
