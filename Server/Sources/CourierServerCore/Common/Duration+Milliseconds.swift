// Courier — Apache-2.0

extension Duration {
    /// The duration in whole milliseconds.
    package var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
