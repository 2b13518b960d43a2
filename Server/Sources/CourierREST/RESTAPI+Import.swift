// Courier — Apache-2.0
internal import CourierAPI
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import Hummingbird
internal import OpenAPIRuntime
internal import CourierServerCore
internal import CourierImport

extension RESTAPI {
    func importHistory(_ input: Operations.ImportHistory.Input) async throws -> Operations.ImportHistory.Output {
        guard case .applicationXNdjson(let body) = input.body else {
            throw HTTPRequestError(.invalidArgument, "The body must be history lines (Content-Type: application/x-ndjson).")
        }
        // The routes already refused a body over the REST limit.
        let text = try await String(collecting: body, upTo: .max)
        let lines = HistoryImport.lines(of: text)
        let history = HistoryImport(store: store, limits: messages.limits)
        do {
            for start in stride(from: 0, to: lines.count, by: HistoryImport.batchLines) {
                try await history.apply(Array(lines[start..<min(start + HistoryImport.batchLines, lines.count)]), first: start + 1)
            }
            // A recall's WAL purge is owed, not waited for: the node's purge service does it (ADR 0007).
        } catch let stopped as HistoryImport.Stopped {
            throw HTTPRequestError(
                .importInvalidRecord,
                "line \(stopped.line): \(stopped.detail). The \(stopped.line - 1) lines before it are stored."
            )
        } catch let error as StorageError {
            // Batches before the failure may be stored: say so rather than "nothing was written".
            let stored = history.summary.lines
            throw HTTPRequestError(
                .internal,
                "The server failed after the chunk's first \(stored) lines were stored; send the chunk again (it stores nothing twice).",
                status: .internalServerError,
                cause: String(describing: error)
            )
        }
        let summary = history.summary
        return .ok(.init(body: .json(.init(
            lines: summary.lines,
            accounts: summary.accounts,
            groups: summary.groups,
            messages: summary.messages,
            reads: summary.reads,
            recalls: summary.recalls,
            duplicates: summary.duplicates,
            resumedAfter: summary.resumedAfter,
            skippedCount: summary.skippedCount,
            skipped: summary.skipped.map { .init(line: $0.line, code: .init(rawValue: $0.code) ?? ._internal, detail: $0.detail) }
        ))))
    }
}
