// Courier — Apache-2.0
public import Foundation

/// A fresh folder under the system's temporary directory, removed when the value is deinitialized.
public final class TemporaryFolder: Sendable {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "courier-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
