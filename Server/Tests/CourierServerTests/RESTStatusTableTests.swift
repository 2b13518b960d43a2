// Courier — Apache-2.0
import CourierServer
import CourierWire
import Foundation
import Testing

/// docs/protocol.md §8's status table is the one the server answers with: every code of §7 has, on the REST
/// API, the status the table gives it (400 when the table does not name it).
@Suite("REST status table")
struct RESTStatusTableTests {
    static let protocolDocument = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/protocol.md")

    /// The backticked codes of a table row.
    static func codes(in line: Substring) -> [String] {
        line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            .filter { $0.allSatisfy { $0.isLetter || $0 == "." } }
    }

    @Test("docs/protocol.md §8 and the server give every error code the same status")
    func agree() throws {
        let text = try String(contentsOf: Self.protocolDocument, encoding: .utf8)
        let sections = text.components(separatedBy: "\n## 8.")
        #expect(sections.count == 2)
        // §7's table: one row per code.
        let allCodes = sections[0].split(separator: "\n").filter { $0.hasPrefix("| `") }.compactMap { Self.codes(in: $0).first }
        #expect(allCodes.count >= 35 && allCodes.contains("internal") && allCodes.contains("request.methodNotAllowed"))
        // §8's table: a status, then the codes it names.
        var documented: [String: Int] = [:]
        var inTable = false
        for line in sections[1].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| status | codes |") { inTable = true; continue }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let status = Int(cells.first ?? "") else { continue }
            for code in Self.codes(in: line) where allCodes.contains(code) { documented[code] = status }
        }
        #expect(documented["internal"] == 500 && documented["request.methodNotAllowed"] == 405)
        for code in allCodes {
            #expect(RESTStatus.of(ErrorCode(rawValue: code)) == documented[code] ?? 400, "\(code)")
        }
    }
}
