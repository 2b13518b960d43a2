// Courier — Apache-2.0
internal import Foundation
public import Logging

/// Writes each log record as one JSON object on one line (`--log-format json`), for log collectors:
/// `{"level":"info","logger":"courier","message":"…","time":"2026-11-24T07:00:00.123Z", …metadata}`, keys sorted.
/// Metadata keys become top-level keys (`courier.account`, `courier.request.id`, Hummingbird's `hb.request.id` …);
/// nested metadata stays nested. Courier never logs a message body, a token or the app secret.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (Data) -> Void

    /// A handler that writes to standard error.
    public init(label: String, level: Logger.Level = .info) {
        self.init(label: label, level: level) { FileHandle.standardError.write($0) }
    }

    init(label: String, level: Logger.Level, write: @escaping @Sendable (Data) -> Void) {
        self.label = label
        self.logLevel = level
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var object: [String: Any] = [:]
        for (key, value) in merged { object[key] = Self.json(value) }
        object["time"] = Self.timestamp()
        object["level"] = event.level.rawValue
        object["logger"] = label
        object["message"] = event.message.description
        if event.level >= .warning { object["source"] = event.source }
        guard
            var data = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.sortedKeys, .withoutEscapingSlashes]
            )
        else { return }
        data.append(0x0A)
        write(data)
    }

    private static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let string): string
        // Numbers stay numbers (`courier.duration.ms`, a status), so a log query can compare them.
        case .stringConvertible(let number as Double): number.isFinite ? number : number.description
        case .stringConvertible(let number as Int): number
        case .stringConvertible(let convertible): convertible.description
        case .array(let array): array.map(json)
        case .dictionary(let dictionary): dictionary.mapValues(json)
        }
    }

    /// UTC, with milliseconds: `2026-11-24T07:00:00.123Z`.
    private static func timestamp() -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date())
    }
}
