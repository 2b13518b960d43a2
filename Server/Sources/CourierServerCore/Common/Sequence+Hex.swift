// Courier — Apache-2.0

extension Sequence<UInt8> {
    /// The bytes in lowercase hex (a digest as SHA-256 sums and SigV4 write it).
    package var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in self { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: text, as: UTF8.self)
    }
}

extension String {
    /// `bytes` random bytes (the system's generator) in lowercase hex.
    package static func randomHex(bytes: Int) -> String {
        (0..<bytes).map { _ in UInt8.random(in: .min ... .max) }.lowercaseHex
    }

    /// A new random (version 4) UUID in lowercase, as `UUID().uuidString.lowercased()` writes it, from the standard
    /// library's generator (two `getrandom` calls). Foundation's `UUID()` opens, reads and closes `/dev/urandom` for
    /// each one on Linux: three system calls on the store's thread for every message that gets an id.
    package static func randomUUID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for word in [generator.next() as UInt64, generator.next() as UInt64] {
            withUnsafeBytes(of: word.bigEndian) { bytes += $0 }
        }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // the RFC 9562 variant
        var text = Array(bytes.lowercaseHex.utf8)
        for offset in [20, 16, 12, 8] { text.insert(UInt8(ascii: "-"), at: offset) }
        return String(decoding: text, as: UTF8.self)
    }
}
