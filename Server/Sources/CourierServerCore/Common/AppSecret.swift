// Courier — Apache-2.0
internal import Foundation

/// The app secret shared by the server and the app's backend: it signs client tokens and authorizes the REST API.
public struct AppSecret: Sendable, Hashable, CustomStringConvertible {
    /// The secret text (at least 32 bytes: HS256 needs a key as long as its hash).
    public let value: String

    /// - Throws: ``AppSecretError/tooShort`` when `value` has fewer than 32 UTF-8 bytes.
    public init(_ value: String) throws(AppSecretError) {
        guard value.utf8.count >= 32 else { throw .tooShort(value.utf8.count) }
        self.value = value
    }

    /// Never prints the secret.
    public var description: String { "AppSecret(redacted)" }

    /// A new random secret: 64 hex characters (256 bits).
    public static func random() -> AppSecret {
        try! AppSecret(String.randomHex(bytes: 32))
    }

    /// Reads the secret from `app-secret` in `folder`; `nil` when there is none.
    public static func load(inFolder folder: String) throws -> AppSecret? {
        let path = (folder as NSString).appendingPathComponent("app-secret")
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try AppSecret(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Reads the secret from `app-secret` in `folder`, creating the folder and a new random secret (mode 0600) on
    /// first use. Returns the secret and whether it was created now.
    public static func loadOrCreate(inFolder folder: String) throws -> (secret: AppSecret, created: Bool) {
        let manager = FileManager.default
        try manager.createDirectory(atPath: folder, withIntermediateDirectories: true)
        if let secret = try load(inFolder: folder) { return (secret, false) }
        let path = (folder as NSString).appendingPathComponent("app-secret")
        let secret = AppSecret.random()
        guard
            manager.createFile(
                atPath: path,
                contents: Data((secret.value + "\n").utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw AppSecretError.unwritable(path) }
        return (secret, true)
    }
}

/// Why an app secret is unusable.
public enum AppSecretError: Error, Hashable, CustomStringConvertible {
    case tooShort(Int)
    case unwritable(String)
    /// No secret at this path (and none in `COURIER_APP_SECRET`).
    case missing(String)
    public var description: String {
        switch self {
        case .missing(let path):
            "No app secret at \(path): run this command with the server's data folder (--data-dir or COURIER_DATA_DIR), "
                + "or set COURIER_APP_SECRET."
        case .tooShort(let count): "The app secret must be at least 32 bytes long (got \(count))."
        case .unwritable(let path): "Cannot write the app secret to \(path)."
        }
    }
}
