// Courier — Apache-2.0
public import CourierDomain
public import CourierStorage
public import CourierWire

/// Written once for every backend that runs ``SQLQuery``s.
extension ImportStore where Self: SQLRunner {
    public func importProgress(of source: String) async throws(StorageError) -> ImportProgress? {
        guard let row = try await readRows("SELECT lines, digest FROM import_progress WHERE source = \(source)").first
        else { return nil }
        return ImportProgress(lines: try row.int(0), digest: try row.string(1))
    }

    public func setImportProgress(
        _ progress: ImportProgress,
        of source: String,
        at time: Timestamp
    ) async throws(StorageError) {
        _ = try await writeRows(
            """
            INSERT INTO import_progress (source, lines, digest, updated_at)
            VALUES (\(source), \(progress.lines), \(progress.digest), \(time.rawValue))
            ON CONFLICT (source) DO UPDATE SET lines = excluded.lines, digest = excluded.digest,
                updated_at = excluded.updated_at
            """
        )
    }
}
