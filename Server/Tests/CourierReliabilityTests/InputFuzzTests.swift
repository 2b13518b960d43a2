// Courier — Apache-2.0
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import PropertyBased
import Testing

/// SPEC §8 by generated input against a running server: valid frames and REST bodies, mutated (values of every JSON
/// type and none, huge numbers, control characters and lone surrogates, missing and unknown keys, truncation, stray
/// bytes). Every request gets exactly one answer, every refusal carries a code that docs/protocol.md documents, the
/// connection stays up, and the REST API never answers 5xx. Failing programs are shrunk and printed. The decoders
/// alone are fuzzed by libFuzzer (Fuzz/run).
@Suite("Generated bad input against a running server", .timeLimit(.minutes(5)))
struct InputFuzzTests {
    /// The codes docs/protocol.md §7 lists.
    static let documentedCodes: Set<String> = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/protocol.md").path
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let section = text.components(separatedBy: "## 7. Error codes").dropFirst().first ?? ""
        return Set(section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `"), let end = line.dropFirst(3).firstIndex(of: "`") else { return nil }
            return String(line[line.index(line.startIndex, offsetBy: 3)..<end])
        })
    }()

    @Test("mutated frames on an authenticated connection: one answer each, documented codes, the connection stays up")
    func frames() async throws {
        #expect(Self.documentedCodes.count > 30, "error codes read from docs/protocol.md")
        await propertyCheck(count: 60, input: Gen.int(in: 0...1_000_000).array(of: 4...40)) { program in
            do {
                try await withTestServer { server in
                    try await server.register("alice", "bob")
                    try await server.withRawConnection { connection in
                        guard case .ack = try await connection.connect(as: "alice", server: server) else {
                            throw FuzzFailure("connect refused")
                        }
                        for (index, number) in program.enumerated() {
                            let text = Mutation.frame(number, index: index)
                            try await Self.expectOneAnswer(to: text, on: connection, ping: "p\(index)")
                        }
                    }
                }
            } catch {
                Issue.record("program \(program): \(error)")
            }
        }
    }

    @Test("mutated REST bodies and paths: never a 5xx, every error with a documented code")
    func restBodies() async throws {
        await propertyCheck(count: 60, input: Gen.int(in: 0...1_000_000).array(of: 4...40)) { program in
            do {
                try await withTestServer { server in
                    try await server.register("alice", "bob")
                    for number in program {
                        let (method, path, body) = Mutation.rest(number)
                        let (status, code) = try await server.rest(method, path, body: body)
                        guard status < 500 else { throw FuzzFailure("\(method) \(path) \(body ?? "") → \(status)") }
                        if status >= 400 {
                            guard let code, Self.documentedCodes.contains(code) else {
                                throw FuzzFailure("\(method) \(path) → \(status) with code \(code ?? "none")")
                            }
                        }
                    }
                }
            } catch {
                Issue.record("program \(program): \(error)")
            }
        }
    }

    /// Sends `text` then a ping; between them exactly one answer must come back, and a refusal must be documented.
    static func expectOneAnswer(to text: String, on connection: RawConnection, ping: String) async throws {
        try await connection.send(text: text)
        try await connection.send(.ping(RequestID(rawValue: ping)))
        var answers: [ServerFrame] = []
        while let frame = try await connection.next() {
            if case .ack(let id, _) = frame, id.rawValue == ping { break }
            if case .event = frame { continue }
            answers.append(frame)
        }
        guard answers.count == 1 else { throw FuzzFailure("\(answers.count) answers to \(text.prefix(300))") }
        if case .error(_, let error) = answers[0], !documentedCodes.contains(error.code.rawValue) {
            throw FuzzFailure("undocumented code \(error.code) for \(text.prefix(300))")
        }
    }
}

struct FuzzFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Valid inputs, and what a number does to them.
enum Mutation {
    static let frames = [
        #"{"type":"send","id":"ID","data":{"conversation":"d:alice:bob","clientId":"c1","body":"hi"}}"#,
        #"{"type":"sync","id":"ID","data":{"cursors":{"d:alice:bob":0},"limit":10}}"#,
        #"{"type":"history","id":"ID","data":{"conversation":"d:alice:bob","before":5,"limit":20}}"#,
        #"{"type":"deliver","id":"ID","data":{"conversation":"d:alice:bob","seq":1}}"#,
        #"{"type":"read","id":"ID","data":{"conversation":"d:alice:bob","seq":1}}"#,
        #"{"type":"read","id":"ID","data":{"conversation":"d:alice:bob","all":true,"private":true}}"#,
        #"{"type":"readReceiptSettings","id":"ID","data":{"sendReadReceipts":false}}"#,
        #"{"type":"unread","id":"ID"}"#,
        #"{"type":"recall","id":"ID","data":{"conversation":"d:alice:bob","messageId":"m1","mode":"twoWay"}}"#,
        #"{"type":"createGroup","id":"ID","data":{"group":"team","clientId":"g1","members":["bob"]}}"#,
        #"{"type":"groupChange","id":"ID","data":{"conversation":"g:team","clientId":"g2","add":["bob"]}}"#,
        #"{"type":"groupMembers","id":"ID","data":{"conversation":"g:team","limit":10}}"#,
        #"{"type":"receiptCounts","id":"ID","data":{"conversation":"g:team","messageIds":["m1"]}}"#,
        #"{"type":"receiptList","id":"ID","data":{"conversation":"g:team","messageId":"m1","list":"unread"}}"#,
        #"{"type":"requestReadReceipts","id":"ID","data":{"conversation":"g:team","messageId":"m1"}}"#,
        #"{"type":"pushToken","id":"ID","data":{"platform":"apns","token":"0aff","sandbox":true}}"#,
        #"{"type":"send","id":"ID","data":{"conversation":"d:alice:bob","clientId":"c2","type":"image","body":"{}"}}"#,
        #"{"type":"connect","id":"ID","data":{"token":"x","device":"d"}}"#,
    ]

    /// Values that break assumptions: every JSON type, extremes, text that is not what it seems.
    static let values = [
        "null", "true", "false", "0", "-1", "1.5", "1e400", "-9223372036854775809", "9223372036854775807",
        #""""#, #""\u0000""#, #""\ud800""#, #""😀""#, #""d:alice:alice""#, #""g:""#, #""x:team""#, "[]", "{}", "[1,[2,[3]]]",
        #"{"a":{"b":{"c":null}}}"#, "\"" + String(repeating: "a", count: 5000) + "\"",
        "[" + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "]",
    ]

    /// A frame from `number`: a template, with a request id, and one mutation.
    static func frame(_ number: Int, index: Int) -> String {
        let template = frames[number % frames.count].replacingOccurrences(of: "ID", with: "f\(index)")
        return mutate(template, number / frames.count)
    }

    static let restTemplates: [(String, String, String?)] = [
        ("POST", "/v1/accounts", #"{"accounts":["carol","dave"]}"#),
        ("PUT", "/v1/accounts/erin", nil),
        ("POST", "/v1/conversations/d:alice:bob/reads", #"{"accounts":["bob"],"seq":0}"#),
        ("POST", "/v1/conversations/d:alice:bob/recall", #"{"messageId":"m1","mode":"oneWay","postscript":"p"}"#),
        ("POST", "/v1/conversations/g:team/reads", #"{"accounts":["bob"],"seq":1}"#),
    ]

    static let pathSegments = ["d:bob:alice", "g:", "%00", "d:alice:bob:carol", String(repeating: "x", count: 3000), "..", "%F0%9F%98%80"]

    static func rest(_ number: Int) -> (String, String, String?) {
        var (method, path, body) = restTemplates[number % restTemplates.count]
        let rest = number / restTemplates.count
        if rest % 5 == 0 {
            let segments = path.split(separator: "/")
            let replaced = pathSegments[(rest / 5) % pathSegments.count]
            path = "/" + segments.dropLast(segments.count > 3 ? 1 : 0).dropLast().joined(separator: "/") + "/" + replaced
                + (segments.count > 3 ? "/" + segments.last! : "")
        } else if let template = body {
            body = mutate(template, rest)
        }
        return (method, path, body)
    }

    /// One mutation of a JSON text, chosen by `number`: a value replaced, a key dropped or added, the text cut, or a
    /// stray byte inserted.
    static func mutate(_ text: String, _ number: Int) -> String {
        let characters = Array(text)
        // Positions where a value starts (after a colon) and where a key starts.
        let valueStarts = characters.indices.filter { characters[$0] == ":" }.map { $0 + 1 }
        let keyStarts = characters.indices.filter { (characters[$0] == "{" || characters[$0] == ",") && $0 + 1 < characters.count && characters[$0 + 1] == "\"" }
        let choice = number % 6
        let argument = number / 6
        switch choice {
        case 0, 1:
            guard !valueStarts.isEmpty else { return text }
            let start = valueStarts[argument % valueStarts.count]
            let end = valueEnd(characters, from: start)
            return String(characters[..<start]) + values[(argument / 7) % values.count] + String(characters[end...])
        case 2:
            guard !keyStarts.isEmpty else { return text }
            let start = keyStarts[argument % keyStarts.count] + 1
            guard let colon = characters[start...].firstIndex(of: ":") else { return text }
            var end = valueEnd(characters, from: colon + 1)
            if end < characters.count, characters[end] == "," { end += 1 }
            return String(characters[..<start]) + String(characters[end...])
        case 3:
            guard let open = characters.firstIndex(of: "{") else { return text }
            return String(characters[...open]) + #""zz\#(argument % 10)":"# + values[argument % values.count] + ","
                + String(characters[(open + 1)...])
        case 4:
            return String(characters.prefix(argument % max(characters.count, 1)))
        default:
            let position = argument % max(characters.count, 1)
            let stray: [Character] = ["\u{0}", "\u{7f}", "\"", "\\", "}", "]", ",", "\u{1b}", "é"]
            return String(characters[..<position]) + String(stray[(argument / 11) % stray.count])
                + String(characters[position...])
        }
    }

    /// Where the JSON value starting at `start` ends (matching brackets, skipping strings).
    static func valueEnd(_ characters: [Character], from start: Int) -> Int {
        var depth = 0
        var inString = false
        var index = start
        while index < characters.count {
            let character = characters[index]
            if inString {
                if character == "\\" { index += 1 } else if character == "\"" { inString = false }
            } else if character == "\"" {
                inString = true
            } else if character == "{" || character == "[" {
                depth += 1
            } else if character == "}" || character == "]" {
                if depth == 0 { return index }
                depth -= 1
            } else if character == ",", depth == 0 {
                return index
            }
            index += 1
            if depth == 0 && !inString && index > start && (characters[index - 1] == "\"" || characters[index - 1] == "}" || characters[index - 1] == "]") && (index < characters.count && (characters[index] == "," || characters[index] == "}" || characters[index] == "]")) {
                return index
            }
        }
        return characters.count
    }
}
