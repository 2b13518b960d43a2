// Courier — Apache-2.0
// A libFuzzer target for the wire decoders: compiled with CourierWire's sources by Fuzz/run (not by SwiftPM).
import Foundation

/// Every error code docs/protocol.md §7 documents for a frame the server cannot accept.
let documentedRejections: Set<ErrorCode> = [.frameInvalid, .frameUnknownType]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    let coder = FrameCoder()
    switch coder.decodeClientFrame(text) {
    case .success(let frame):
        // What decodes must encode, and decode again to the same frame.
        guard let encoded = try? coder.encode(frame), case .success(let again) = coder.decodeClientFrame(encoded),
            again == frame
        else { fatalError("client frame does not round-trip: \(text)") }
    case .failure(let rejection):
        guard documentedRejections.contains(rejection.error.code) else {
            fatalError("undocumented code \(rejection.error.code) for \(text)")
        }
    }
    // The hand-written readers must read what they read exactly as JSONDecoder does.
    if let scanned = ClientFrameScanner.frame(text) {
        guard case .success(let decoded) = coder.decodeClientFrameWithJSONDecoder(text), decoded == scanned else {
            fatalError("the client-frame scanner reads a frame otherwise than JSONDecoder: \(text)")
        }
    }
    if let scanned = ServerFrameScanner.frame(text) {
        guard let decoded = try? coder.decodeServerFrameWithJSONDecoder(text), decoded == scanned else {
            fatalError("the scanner reads a frame otherwise than JSONDecoder: \(text)")
        }
    }
    // The SDK's side: a server frame that decodes must encode (hand-written encoder) and decode to itself, and the
    // hand-written encoder (written from wire-types.table, ADR 0036) must write the bytes JSONEncoder writes.
    if let frame = try? coder.decodeServerFrame(text) {
        let written = coder.encode(frame)
        guard let again = try? coder.decodeServerFrame(written), again == frame else {
            fatalError("server frame does not round-trip: \(text)")
        }
        guard written == (try? foundationJSON(frame)) else {
            fatalError("the writer writes a frame otherwise than JSONEncoder: \(text)")
        }
    }
    return 0
}

/// `frame` as `JSONEncoder` writes it (``FrameCoder``'s generic path, with sorted keys).
func foundationJSON<Frame: Encodable>(_ frame: Frame) throws -> String { try FrameCoder().encode(frame) }
