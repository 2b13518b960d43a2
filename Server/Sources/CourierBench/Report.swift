// Courier — Apache-2.0
import Foundation

/// A JSON value for reports (keys keep their order, so the human table and the JSON read the same way).
enum JSONValue: Sendable {
    case integer(Int)
    case number(Double)
    case string(String)
    case null
    case object([(String, JSONValue)])

    static func latency(_ samples: Samples) -> JSONValue {
        .object([("p50", .number(samples.percentile(50))), ("p99", .number(samples.percentile(99)))])
    }

    var json: String {
        switch self {
        case .integer(let value): String(value)
        case .number(let value): value.isFinite ? String(format: "%.3f", value) : "null"
        case .string(let value):
            "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                + "\""
        case .null: "null"
        case .object(let fields): "{" + fields.map { "\"\($0.0)\":\($0.1.json)" }.joined(separator: ",") + "}"
        }
    }

    var text: String {
        switch self {
        case .number(let value): String(format: "%.3f", value)
        case .object(let fields): fields.map { "\($0.0) \($0.1.text)" }.joined(separator: ", ")
        case .null: "n/a"
        default: json
        }
    }
}

/// One scenario's figures, in order.
struct Report: Sendable {
    private(set) var fields: [(String, JSONValue)] = []

    subscript(key: String) -> JSONValue? {
        get { fields.first { $0.0 == key }?.1 }
        set {
            fields.removeAll { $0.0 == key }
            if let newValue { fields.append((key, newValue)) }
        }
    }

    var json: String { JSONValue.object(fields).json }

    var table: String {
        let width = fields.map(\.0.count).max() ?? 0
        return fields.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1.text }
            .joined(separator: "\n")
    }
}
