// Courier — Apache-2.0

/// A pipelined request's place in the store's commit order (``SessionStateMachine``, ADRs 0018 and 0042).
package struct StorePlace: Sendable {
    /// Awaited just before the request's write: the request before it about the same conversation has its place.
    var after: (@Sendable () async -> Void)?
    /// Called once the request has its place (its write queued, or joined to a waiting one).
    package var queued: (@Sendable () -> Void)?

    package init(after: (@Sendable () async -> Void)? = nil, queued: (@Sendable () -> Void)? = nil) {
        self.after = after
        self.queued = queued
    }
}
