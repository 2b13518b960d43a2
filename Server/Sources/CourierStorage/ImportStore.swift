// Courier — Apache-2.0
public import CourierDomain
public import CourierWire

/// How far an import of one source got (docs/import.md, ADR 0031): its first `lines` lines are applied, and `digest`
/// is the SHA-256 of those lines, so that running the same file again starts after them — instead of judging its
/// skipped lines again against what came after them — and a changed file is noticed.
public struct ImportProgress: Hashable, Sendable {
    public let lines: Int
    /// Lowercase hex of the SHA-256 of the first `lines` lines, each with its newline.
    public let digest: String
    public init(lines: Int, digest: String) {
        self.lines = lines
        self.digest = digest
    }
}

public protocol ImportStore: Sendable {
    /// Where imports of `source` got to; `nil` for a source never imported.
    func importProgress(of source: String) async throws(StorageError) -> ImportProgress?
    /// Records where an import of `source` got to.
    func setImportProgress(_ progress: ImportProgress, of source: String, at time: Timestamp) async throws(StorageError)
}
