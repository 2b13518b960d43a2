// Courier — Apache-2.0
internal import CourierWire

/// The files a message refers to: the ids in the media addresses (`…/v1/media/md_…`, slashes escaped or not) its
/// body or `ext` carries.
/// Written once for the recall that erases them and the collector that keeps them.
public enum MediaReference {
    static let marker = Array("/v1/media/md_".utf8)
    static let hexDigits = 32

    /// The ids of the files `texts` refer to, each once, in order of appearance.
    public static func ids(in texts: [String?]) -> [String] {
        var ids: [String] = []
        for text in texts {
            guard let text else { continue }
            // JSON may escape the slashes (`ext` as some encoders write it).
            var bytes: [UInt8] = []
            for byte in text.utf8 {
                if byte == UInt8(ascii: "/"), bytes.last == UInt8(ascii: "\\") { bytes.removeLast() }
                bytes.append(byte)
            }
            var index = 0
            while index + marker.count + hexDigits <= bytes.count {
                guard bytes[index..<index + marker.count].elementsEqual(marker) else {
                    index += 1
                    continue
                }
                let start = index + marker.count
                let digits = bytes[start..<start + hexDigits]
                if digits.allSatisfy(isHex), start + hexDigits == bytes.count || !isHex(bytes[start + hexDigits]) {
                    let id = "md_" + String(decoding: digits, as: UTF8.self)
                    if !ids.contains(id) { ids.append(id) }
                }
                index = start
            }
        }
        return ids
    }

    /// Whether `id` has the shape of a file's id.
    public static func isValid(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return bytes.count == 3 + hexDigits && id.hasPrefix("md_") && bytes.dropFirst(3).allSatisfy(isHex)
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}
