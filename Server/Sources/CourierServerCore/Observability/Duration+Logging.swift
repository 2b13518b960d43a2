// Courier — Apache-2.0

extension Duration {
    /// In milliseconds, to the microsecond (for logs).
    package var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds * 1_000_000 + attoseconds / 1_000_000_000_000) / 1000
    }
}
