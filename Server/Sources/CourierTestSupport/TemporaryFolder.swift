// Courier — Apache-2.0
internal import Foundation

/// A fresh folder under the system's temporary directory, removed when the value is deinitialized.
public final class TemporaryFolder: Sendable {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "courier-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Whether any file in the folder (a database, its WAL, its shared memory) contains `text`'s bytes.
    public func filesContain(_ text: String) throws -> Bool {
        let needle = Data(text.utf8)
        for name in try FileManager.default.contentsOfDirectory(atPath: path) {
            let data = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
            if data.range(of: needle) != nil { return true }
        }
        return false
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
