// Courier — Apache-2.0
@testable import CourierImport
import CourierTestSupport
import Foundation
import Testing

/// The import's line scanner (``HistoryRecord/Line/scan(_:)``) answers what `JSONDecoder` answers, or leaves the line
/// to it: checked on the converters' real output, on lines written to be awkward, and on thousands of mutations of
/// them (bytes changed, cut, repeated).
@Suite("History line scanner")
struct HistoryLineScannerTests {
    static let samples: [String] = {
        let folder = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../../scripts/import/samples")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return files.filter { $0.hasSuffix(".expected.jsonl") }.sorted().flatMap { name in
            ((try? String(contentsOf: folder.appending(path: name), encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }
    }()

    static let awkward: [String] = [
        #"{"kind":"message","id":"1","from":"a","to":"b","time":1,"body":"plain"}"#,
        #" { "kind" : "message" , "id" : "1" , "time" : 0 , "body" : "" } "#,
        #"{"kind":"message","body":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \u0000"}"#,
        #"{"kind":"message","body":"lone \ud83d"}"#,
        #"{"kind":"message","body":"lone \ude00"}"#,
        #"{"kind":"message","body":"bad \x"}"#,
        "{\"kind\":\"message\",\"body\":\"tab\tinside\"}",
        #"{"kind":"message","body":"héllo 世界 😀"}"#,
        #"{"kind":"message","time":-0}"#,
        #"{"kind":"message","time":-12}"#,
        #"{"kind":"message","time":01}"#,
        #"{"kind":"message","time":1.0}"#,
        #"{"kind":"message","time":1e3}"#,
        #"{"kind":"message","time":9223372036854775807}"#,
        #"{"kind":"message","time":9223372036854775808}"#,
        #"{"kind":"message","time":-9223372036854775808}"#,
        #"{"kind":"message","time":"1"}"#,
        #"{"kind":"message","time":null,"body":null,"ext":null,"accounts":null,"private":null}"#,
        #"{"kind":null}"#,
        #"{"kind":"message","kind":"read"}"#,
        #"{"kind":"message","unknown":{"a":[1,2]}}"#,
        #"{"kind":"group","accounts":["a","b"],"action":"added"}"#,
        #"{"kind":"group","accounts":[]}"#,
        #"{"kind":"group","accounts":["a",1]}"#,
        #"{"kind":"message","ext":{"k":"v","w":"x"}}"#,
        #"{"kind":"message","ext":{}}"#,
        #"{"kind":"message","ext":{"k":"v","k":"w"}}"#,
        #"{"kind":"message","ext":{"k":1}}"#,
        #"{"kind":"read","private":true,"needsReadReceipt":false}"#,
        #"{"kind":"read","private":truex}"#,
        #"{"kind":"read","private":True}"#,
        #"{"ki\u006ed":"message"}"#,
        #"{"kind":"message"} x"#,
        #"{"kind":"message",}"#,
        #"{}"#,
        #"[]"#,
        #""#,
        #"{"kind":"message""#,
        "{\"kind\":\"message\",\"body\":\"\u{FEFF}bom\"}",
    ]

    /// Equal answers, or the scanner leaves the line to the decoder.
    static func check(_ line: String) {
        let decoded = try? JSONDecoder().decode(HistoryRecord.Line.self, from: Data(line.utf8))
        guard let scanned = HistoryRecord.Line.scan(Substring(line)) else { return }
        #expect(scanned == decoded, "\(line)")
    }

    @Test("the converters' output and awkward lines: the same answer, or the decoder's")
    func samplesAndAwkward() {
        #expect(Self.samples.count > 20)
        // Where the scanner is meant to answer, it does (it is not a decoder that always gives up).
        #expect(Self.samples.allSatisfy { HistoryRecord.Line.scan(Substring($0)) != nil })
        for line in Self.samples + Self.awkward { Self.check(line) }
    }

    @Test("20,000 mutations of those lines: the same answer, or the decoder's")
    func mutations() {
        var generator = SplitMix64(seed: 0x5EED_2026_1128)
        let lines = Self.samples + Self.awkward.filter { !$0.isEmpty }
        let alphabet = Array(#"{}[]":,\ u0123456789abcdefABCDEF-.eEtrunfalsx"#.utf8) + [0x09, 0x0A, 0x80, 0xC3, 0xFF]
        for _ in 0..<20_000 {
            var bytes = Array(lines[Int(generator.next() % UInt64(lines.count))].utf8)
            for _ in 0..<(1 + Int(generator.next() % 3)) where !bytes.isEmpty {
                let at = Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 4 {
                case 0: bytes[at] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: at)
                default: bytes = Array(bytes[..<at])
                }
            }
            // Lines are split on newlines before they are read.
            let line = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
            Self.check(line)
        }
    }
}
