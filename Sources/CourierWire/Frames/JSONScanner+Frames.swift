// Courier — Apache-2.0

/// What the frames' objects are read with. The objects themselves are read by functions written from
/// `wire-types.table` (WireCoding+Generated.swift, ADR 0036): a required field missing, or a value of another kind, is
/// ``JSONScanner/Unreadable``, and the frame then goes to `JSONDecoder`, which says what is wrong.
extension JSONScanner {
    /// An object of string values (a message's `ext`), keys in any order; a repeated key is unreadable here (the
    /// `JSONDecoder` path says what is wrong).
    mutating func stringMap() throws -> [String: String] {
        var map: [String: String] = [:]
        try object(ordered: false) { scanner, key in
            let name = scanner.text(of: key)
            guard map.updateValue(try scanner.string(), forKey: name) == nil else { throw Unreadable() }
        }
        return map
    }

    /// A string enum's value; one this build does not know is not read (`JSONDecoder` then says so).
    mutating func enumeration<T: RawRepresentable>(_ type: T.Type) throws -> T where T.RawValue == String {
        guard let value = T(rawValue: try string()) else { throw Unreadable() }
        return value
    }

    static func int(_ value: Int64) throws -> Int {
        guard let int = Int(exactly: value) else { throw Unreadable() }
        return int
    }
}
