// Courier — Apache-2.0
public import CourierWire
internal import Foundation

/// How both backends store a notice: JSON text in the entry's `recall` (or `group_change`) column.
public enum EntryJSON {
    public static func encode(_ value: (some Encodable)?) throws -> String? {
        guard let value else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// An `ext` as a profile change sets it: `nil` keeps what is stored, `""` clears it, else its JSON (`owner` names
    /// whose ext could not be encoded).
    public static func settable(_ ext: [String: String]?, of owner: String) throws(StorageError) -> String? {
        guard let ext else { return nil }
        do { return ext.isEmpty ? "" : try encode(ext) } catch {
            throw .failed("\(owner)'s ext could not be encoded: \(error)")
        }
    }

    /// - Throws: ``StorageError/failed(_:)`` when stored text does not decode (a damaged row is reported, never
    ///   served as a message without its notice).
    public static func decode<T: Decodable>(_ type: T.Type, _ text: String?) throws(StorageError) -> T? {
        guard let text else { return nil }
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw .failed("A stored \(T.self) does not decode: \(error)")
        }
    }

}
