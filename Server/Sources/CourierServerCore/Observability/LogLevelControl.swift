// Courier — Apache-2.0
public import Logging
internal import Synchronization

/// The server's log level, changeable while it runs (`PUT /v1/server/log-level`): the handlers the command
/// bootstraps read it at each line, through ``LevelControlledLogHandler``.
public final class LogLevelControl: Sendable {
    private static let levels = Logger.Level.allCases
    private let index: Atomic<Int>

    public init(_ level: Logger.Level = .info) {
        index = Atomic(Self.levels.firstIndex(of: level) ?? 2)
    }

    public var level: Logger.Level { Self.levels[index.load(ordering: .relaxed)] }

    public func set(_ level: Logger.Level) {
        index.store(Self.levels.firstIndex(of: level) ?? 2, ordering: .relaxed)
    }
}

/// A log handler whose level is the server's ``LogLevelControl``: the handler it wraps writes every line it is given.
/// Setting `logLevel` on a logger changes nothing (the level is the server's, set through the API).
public struct LevelControlledLogHandler: LogHandler {
    private var inner: any LogHandler
    private let control: LogLevelControl

    public init(_ inner: any LogHandler, control: LogLevelControl) {
        self.inner = inner
        self.inner.logLevel = .trace
        self.control = control
    }

    public var logLevel: Logger.Level {
        get { control.level }
        set {}
    }

    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        inner.log(event: event)
    }
}
