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
}
