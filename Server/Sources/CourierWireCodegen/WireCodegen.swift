// Courier — Apache-2.0

/// Writes the wire types' hand-rolled JSON scanner (`JSONScanner`) and writer (`JSONTextWriter`) from one table
/// (`Sources/CourierWire/Frames/wire-types.table`, ADR 0036): each type's fields once — JSON key, Swift label, kind —
/// instead of a scanner, a writer and the `Codable` conformance each spelling them. `Codable` stays, as the oracle the
/// tests compare both with.
///
/// The table, one declaration per line (`#` starts a comment):
///
///     type WireMessage message scan write public
///       body          body          String
///       clientId      clientID      id(ClientMessageID)
///       group         group         object(WireGroupChange)?
///
/// - `type <Swift type> <function> [scan] [write] [public]`: the scanner is `JSONScanner.<function>()`, the writer
///   `JSONTextWriter.<function>(_:)`; `public` makes the writer public (the server writes webhook payloads with it).
/// - a field: `<JSON key> <init label> <kind>`, in the order of the type's memberwise initializer. Kinds: `String`,
///   `Bool`, `Int64`, `Int`, `Seq`, `Timestamp`, `[String:String]`, `id(T)` (a string wrapper: `T(rawValue:)`),
///   `enum(T)` (a string enum: an unknown value is not read), `object(T)` (a type of the table; written with
///   `JSONEncoder` when the table does not write it), `[kind]` (an array); `?` after a kind: optional (omitted when
///   `nil`, as `JSONEncoder` omits it; `null` read as `nil`, as `JSONDecoder` reads it).
///
/// The writer writes keys sorted by their UTF-8 bytes, as `JSONEncoder` with `.sortedKeys` does.
public enum WireCodegen {
    public struct TableError: Error, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "wire-types.table:\(line): \(reason)" }
    }

    indirect enum Kind: Equatable {
        case string, bool, int64, int, seq, timestamp, stringMap
        case id(String)
        case enumeration(String)
        case object(String)
        case list(Kind)

        init(parsing text: Substring, line: Int) throws {
            func argument(_ prefix: String) -> String? {
                guard text.hasPrefix(prefix + "("), text.hasSuffix(")") else { return nil }
                return String(text.dropFirst(prefix.count + 1).dropLast())
            }
            switch text {
            case "String": self = .string
            case "Bool": self = .bool
            case "Int64": self = .int64
            case "Int": self = .int
            case "Seq": self = .seq
            case "Timestamp": self = .timestamp
            case "[String:String]": self = .stringMap
            default:
                if let type = argument("id") {
                    self = .id(type)
                } else if let type = argument("enum") {
                    self = .enumeration(type)
                } else if let type = argument("object") {
                    self = .object(type)
                } else if text.hasPrefix("["), text.hasSuffix("]") {
                    self = .list(try Kind(parsing: text.dropFirst().dropLast(), line: line))
                } else {
                    throw TableError(line: line, reason: "unknown kind \(text)")
                }
            }
        }

        /// The Swift type of a value of this kind.
        var swiftType: String {
            switch self {
            case .string: "String"
            case .bool: "Bool"
            case .int64: "Int64"
            case .int: "Int"
            case .seq: "Seq"
            case .timestamp: "Timestamp"
            case .stringMap: "[String: String]"
            case .id(let type), .enumeration(let type), .object(let type): type
            case .list(let element): "[\(element.swiftType)]"
            }
        }
    }

    struct Field {
        let key: String
        let label: String
        let kind: Kind
        let optional: Bool
    }

    struct TypeDeclaration {
        let name: String
        let function: String
        let scans: Bool
        let writes: Bool
        let isPublic: Bool
        var fields: [Field] = []
    }

    static func parse(_ table: String) throws -> [TypeDeclaration] {
        var types: [TypeDeclaration] = []
        for (number, rawLine) in table.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = words.first else { continue }
            // A declaration starts its line; a field is indented (a field may be called `type`).
            if first == "type", rawLine.first == "t" {
                guard words.count >= 3 else { throw TableError(line: number + 1, reason: "type <name> <function> …") }
                let flags = Set(words.dropFirst(3).map(String.init))
                guard flags.isSubset(of: ["scan", "write", "public"]) else {
                    throw TableError(line: number + 1, reason: "unknown flags \(flags.subtracting(["scan", "write", "public"]))")
                }
                types.append(
                    TypeDeclaration(
                        name: String(words[1]), function: String(words[2]), scans: flags.contains("scan"),
                        writes: flags.contains("write"), isPublic: flags.contains("public")
                    )
                )
            } else {
                guard words.count == 3, !types.isEmpty else {
                    throw TableError(line: number + 1, reason: "a field is <key> <label> <kind>, after a type")
                }
                var kindText = words[2]
                let optional = kindText.hasSuffix("?")
                if optional { kindText = kindText.dropLast() }
                types[types.count - 1].fields.append(
                    Field(
                        key: String(words[0]), label: String(words[1]),
                        kind: try Kind(parsing: kindText, line: number + 1), optional: optional
                    )
                )
            }
        }
        // Every object kind names a type of the table that scans when its owner scans.
        let byName = Dictionary(types.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for type in types {
            for field in type.fields {
                var kind = field.kind
                while case .list(let element) = kind { kind = element }
                guard case .object(let name) = kind else { continue }
                guard let referenced = byName[name] else {
                    throw TableError(line: 0, reason: "\(type.name).\(field.label): \(name) is not in the table")
                }
                if type.scans, !referenced.scans {
                    throw TableError(line: 0, reason: "\(type.name) scans, so \(name) must scan")
                }
            }
        }
        return types
    }

    /// The Swift source of the scanner and writer functions the table describes.
    public static func generate(table: String) throws -> String {
        let types = try parse(table)
        let byName = Dictionary(types.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var out = """
            // Courier — Apache-2.0
            // Generated by `swift run --package-path Server courier-wire-codegen` from wire-types.table (ADR 0036).
            // Do not edit: edit the table and run the generator; `WireCodegenTests` fails while this file is stale.

            extension JSONScanner {

            """
        for type in types where type.scans { out += scanner(type, byName: byName) }
        out += "}\n\nextension JSONTextWriter {\n"
        for type in types where type.writes { out += mergingLiterals(writer(type, byName: byName)) }
        out += "}\n"
        return out
    }

    /// Consecutive `raw("…")` calls of literals, at one indentation, as one call: one append instead of several.
    static func mergingLiterals(_ code: String) -> String {
        var lines: [String] = []
        for line in code.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let literal = rawLiteral(line), let previous = lines.last, let before = rawLiteral(previous),
                before.indent == literal.indent
            {
                lines[lines.count - 1] = "\(literal.indent)raw(\"\(before.text)\(literal.text)\")"
            } else {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The indentation and the text of a line `raw("…")` that writes a literal.
    static func rawLiteral(_ line: String) -> (indent: String, text: String)? {
        let indent = String(line.prefix { $0 == " " })
        let rest = line.dropFirst(indent.count)
        guard rest.hasPrefix("raw(\""), rest.hasSuffix("\")") else { return nil }
        let text = rest.dropFirst(5).dropLast(2)
        guard !text.contains("\\(") else { return nil }
        return (indent, String(text))
    }

    // MARK: Scanner

    static func scanner(_ type: TypeDeclaration, byName: [String: TypeDeclaration]) -> String {
        var out = "    mutating func \(type.function)() throws -> \(type.name) {\n"
        for field in type.fields { out += "        var \(field.label): \(field.kind.swiftType)?\n" }
        out += "        try object { scanner, key in\n"
        for (index, field) in type.fields.enumerated() {
            out += "            \(index == 0 ? "if" : "} else if") scanner.key(key, is: \"\(field.key)\") {\n"
            let value = scan(field.kind, on: "scanner", byName: byName)
            if field.optional {
                out += "                \(field.label) = try scanner.null() ? nil : \(value)\n"
            } else {
                out += "                \(field.label) = \(value)\n"
            }
        }
        out += "            } else {\n                try scanner.skipValue()\n            }\n        }\n"
        let required = type.fields.filter { !$0.optional }.map(\.label)
        if !required.isEmpty {
            out += "        guard \(required.map { "let \($0)" }.joined(separator: ", ")) else { throw Unreadable() }\n"
        }
        out += "        return \(type.name)(\n"
        out += type.fields.map { "            \($0.label): \($0.label)" }.joined(separator: ",\n")
        out += "\n        )\n    }\n\n"
        return out
    }

    /// An expression that reads a value of `kind` with the scanner `scanner` (a `try` expression).
    static func scan(_ kind: Kind, on scanner: String, byName: [String: TypeDeclaration]) -> String {
        switch kind {
        case .string: "try \(scanner).string()"
        case .bool: "try \(scanner).bool()"
        case .int64: "try \(scanner).int64()"
        case .int: "try Self.int(\(scanner).int64())"
        case .seq: "Seq(try \(scanner).int64())"
        case .timestamp: "Timestamp(milliseconds: try \(scanner).int64())"
        case .stringMap: "try \(scanner).stringMap()"
        case .id(let type): "\(type)(rawValue: try \(scanner).string())"
        case .enumeration(let type): "try \(scanner).enumeration(\(type).self)"
        case .object(let type): "try \(scanner).\(byName[type]!.function)()"
        case .list(let element): "try \(scanner).array { \(scan(element, on: "$0", byName: byName)) }"
        }
    }

    // MARK: Writer

    static func writer(_ type: TypeDeclaration, byName: [String: TypeDeclaration]) -> String {
        let fields = type.fields.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        var out = "    \(type.isPublic ? "public " : "")mutating func \(type.function)(_ value: \(type.name)) {\n"
        out += "        raw(\"{\")\n"
        // Before the first required field a present optional field is followed by a comma; after it, every field is
        // preceded by one. A type with no required field counts what it wrote.
        let firstRequired = fields.firstIndex { !$0.optional }
        if firstRequired == nil { out += "        var written = false\n" }
        for (index, field) in fields.enumerated() {
            let separator: String
            let trailing: Bool
            if let firstRequired {
                separator = index > firstRequired ? "," : ""
                trailing = index < firstRequired
            } else {
                separator = ""
                trailing = false
            }
            let name = "\\\"\(field.key)\\\":"
            if field.optional {
                out += "        if let \(field.label) = value.\(field.label) {\n"
                if firstRequired == nil {
                    out += "            if written { raw(\",\") }\n            written = true\n"
                }
                out += "            raw(\"\(separator)\(name)\")\n"
                out += write(field.kind, field.label, indent: "            ", byName: byName)
                if trailing { out += "            raw(\",\")\n" }
                out += "        }\n"
            } else {
                out += "        raw(\"\(separator)\(name)\")\n"
                out += write(field.kind, "value.\(field.label)", indent: "        ", byName: byName)
            }
        }
        out += "        raw(\"}\")\n    }\n\n"
        return out
    }

    /// Statements that write `value` of `kind`.
    static func write(_ kind: Kind, _ value: String, indent: String, byName: [String: TypeDeclaration]) -> String {
        switch kind {
        case .string: "\(indent)string(\(value))\n"
        case .id, .enumeration: "\(indent)string(\(value).rawValue)\n"
        case .bool, .int64, .int: "\(indent)raw(String(\(value)))\n"
        case .seq, .timestamp: "\(indent)raw(String(\(value).rawValue))\n"
        case .stringMap: "\(indent)stringMap(\(value))\n"
        case .object(let type):
            byName[type]!.writes ? "\(indent)\(byName[type]!.function)(\(value))\n" : "\(indent)foundation(\(value))\n"
        case .list(let element):
            "\(indent)raw(\"[\")\n"
                + "\(indent)for (index, element) in \(value).enumerated() {\n"
                + "\(indent)    if index > 0 { raw(\",\") }\n"
                + write(element, "element", indent: indent + "    ", byName: byName)
                + "\(indent)}\n"
                + "\(indent)raw(\"]\")\n"
        }
    }
}
