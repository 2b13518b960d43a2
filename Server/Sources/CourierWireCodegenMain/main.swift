// Courier — Apache-2.0
// `swift run --package-path Server courier-wire-codegen`: writes the wire types' scanner and writer from their table
// (ADR 0036). Run it after editing Sources/CourierWire/Frames/wire-types.table; `WireCodegenTests` fails until then.
import CourierWireCodegen
import Foundation

let frames = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Sources/CourierWire/Frames")
do {
    let table = try String(contentsOf: frames.appendingPathComponent("wire-types.table"), encoding: .utf8)
    let output = frames.appendingPathComponent("WireCoding+Generated.swift")
    try WireCodegen.generate(table: table).write(to: output, atomically: true, encoding: .utf8)
    print("wrote \(output.path)")
} catch {
    FileHandle.standardError.write(Data("courier-wire-codegen: \(error)\n".utf8))
    exit(1)
}
