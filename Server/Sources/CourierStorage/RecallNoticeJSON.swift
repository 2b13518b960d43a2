// Courier — Apache-2.0
public import CourierWire
internal import Foundation

/// How both backends store a recall notice: JSON text in the entry's `recall` column.
public enum RecallNoticeJSON {
    public static func encode(_ notice: WireRecallNotice?) throws -> String? {
        guard let notice else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(notice), as: UTF8.self)
    }

    public static func decode(_ text: String?) -> WireRecallNotice? {
        guard let text else { return nil }
        return try? JSONDecoder().decode(WireRecallNotice.self, from: Data(text.utf8))
    }
}
