// Courier — Apache-2.0
public import CourierWire

/// Receipt counts and lists, written once for every backend that runs ``SQLQuery``s.
extension GroupStore where Self: SQLRunner {
    public func receiptCounts(in group: ConversationID, seqs: [Seq]) async throws(StorageError) -> [Seq: ReceiptTally] {
        var tallies: [Seq: ReceiptTally] = [:]
        for row in try await readRows(ReceiptTally.query(group, seqs: Array(Set(seqs)))) {
            tallies[Seq(try row.int64(4))] = try ReceiptTally(row)
        }
        return tallies
    }

    public func receiptList(_ query: ReceiptListQuery) async throws(StorageError) -> ReceiptPage {
        try await read(ReceiptListProcedure(query))
    }
}
