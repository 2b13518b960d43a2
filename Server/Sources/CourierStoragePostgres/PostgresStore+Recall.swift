// Courier — Apache-2.0
internal import CourierStorage
internal import CourierSQL
public import CourierDomain
internal import CourierWire
internal import PostgresNIO

extension PostgresStore {
    public func recall(_ entry: MessageDraft, rules: RecallPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.recall != nil else { return try await append(entry) }
        do {
            return try await appendOnce(entry, recallRules: rules)
        } catch .conflict {
            return try await appendOnce(entry, recallRules: rules)
        }
    }

    public func edit(_ entry: MessageDraft, rules: EditPlan.Rules) async throws(StorageError) -> AppendOutcome {
        guard entry.edit != nil else { return try await append(entry) }
        do {
            return try await appendOnce(entry, editRules: rules)
        } catch .conflict {
            return try await appendOnce(entry, editRules: rules)
        }
    }

}
