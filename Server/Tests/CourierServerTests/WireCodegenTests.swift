// Courier — Apache-2.0
import CourierWireCodegen
import Foundation
import Testing

/// The wire types' scanner and writer are written from one table (ADR 0036): the committed output is what the table
/// gives today, and the table's mistakes are named, not turned into code that does not compile or reads wrong.
@Suite("Wire codegen")
struct WireCodegenTests {
    static let frames = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/CourierWire/Frames")

    @Test("WireCoding+Generated.swift is what wire-types.table gives (else: swift run --package-path Server courier-wire-codegen)")
    func generatedIsFresh() throws {
        let table = try String(contentsOf: Self.frames.appendingPathComponent("wire-types.table"), encoding: .utf8)
        let committed = try String(
            contentsOf: Self.frames.appendingPathComponent("WireCoding+Generated.swift"),
            encoding: .utf8
        )
        #expect(try WireCodegen.generate(table: table) == committed)
    }

    @Test("a table's mistakes are refused, not turned into code")
    func mistakes() throws {
        #expect(throws: WireCodegen.TableError.self) { try WireCodegen.generate(table: "type T t scan\n  a a Float\n") }
        #expect(throws: WireCodegen.TableError.self) { try WireCodegen.generate(table: "  a a String\n") }
        #expect(throws: WireCodegen.TableError.self) { try WireCodegen.generate(table: "type T t scan\n  a a object(U)\n") }
        #expect(throws: WireCodegen.TableError.self) { try WireCodegen.generate(table: "type T t scan flying\n") }
    }

    @Test("the writer writes keys in JSONEncoder's sorted order; optional ones only when present")
    func writerOrder() throws {
        let source = try WireCodegen.generate(
            table: "type T t write\n  zed zed String\n  alpha alpha Bool?\n  mid mid Seq\n"
        )
        let alpha = try #require(source.range(of: #"\"alpha\":"#))
        let mid = try #require(source.range(of: #"\"mid\":"#))
        let zed = try #require(source.range(of: #"\"zed\":"#))
        #expect(alpha.lowerBound < mid.lowerBound && mid.lowerBound < zed.lowerBound)
        #expect(source.contains("if let alpha = value.alpha {"))
    }
}
