// Courier — Apache-2.0
internal import CourierStorage
internal import CoreMetrics
internal import CourierDomain
internal import CourierWire
internal import Foundation
internal import Logging
internal import NIOCore
internal import NIOWebSocket

extension Duration {
    /// In milliseconds, to the microsecond (for logs).
    var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds * 1_000_000 + attoseconds / 1_000_000_000_000) / 1000
    }
}
