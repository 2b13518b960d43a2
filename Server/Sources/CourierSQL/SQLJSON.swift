// Courier — Apache-2.0
internal import CourierStorage
public import CourierWire

/// JSON arrays handed to SQL as one parameter (SQLite's `json_each`), so that a list of any length is one bound value
/// and one cached statement.
public enum SQLJSON {
    /// A JSON array of seqs, for `json_each`.
    public static func seqList(_ seqs: [Seq]) -> String {
        "[" + seqs.map { String($0.rawValue) }.joined(separator: ",") + "]"
    }

    /// A JSON array of strings, for `json_each` (`"` and `\\` escaped; control characters, which no id holds, dropped).
    public static func stringList(_ strings: [String]) -> String {
        // Byte by byte into one buffer (a scalar at a time into a string each was a twentieth of an import's writer).
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        bytes.reserveCapacity(strings.reduce(2) { $0 + $1.utf8.count + 3 })
        for (index, string) in strings.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            // A multi-byte character's bytes are all 0x80 or more: kept whole.
            for byte in string.utf8 where byte >= 0x20 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
