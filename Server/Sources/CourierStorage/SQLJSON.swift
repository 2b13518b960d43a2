// Courier — Apache-2.0
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
        let items = strings.map { string in
            var escaped = "\""
            for scalar in string.unicodeScalars where scalar.value >= 0x20 {
                if scalar == "\"" || scalar == "\\" { escaped.unicodeScalars.append("\\") }
                escaped.unicodeScalars.append(scalar)
            }
            return escaped + "\""
        }
        return "[" + items.joined(separator: ",") + "]"
    }
}
