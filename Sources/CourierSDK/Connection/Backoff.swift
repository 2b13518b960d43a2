// Courier — Apache-2.0

/// Delays between reconnection attempts: exponential with full jitter, capped.
public struct Backoff: Sendable, Hashable {
    public var initial: Duration
    public var maximum: Duration

    public init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(30)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The delay before attempt `attempt` (0 = the first retry), given a random fraction in 0...1.
    public func delay(attempt: Int, jitter: Double) -> Duration {
        let exponent = min(attempt, 16)
        let ceiling = min(initial * (1 << exponent), maximum)
        return ceiling * max(0.5, min(jitter, 1))
    }
}
