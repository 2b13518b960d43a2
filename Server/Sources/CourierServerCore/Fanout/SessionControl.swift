// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import Foundation
package import NIOCore

/// Why the server ends a session by itself; the reason is the WebSocket close frame's reason (``closeCode``).
package enum SessionEndReason: String, Sendable {
    /// No successful `connect` within the authentication time.
    case authTimeout = "auth.timeout"
    /// The token the session authenticated with has expired (the device gets `auth.tokenExpired` first).
    case tokenExpired = "auth.tokenExpired"
    /// Too many failed `connect`s on this connection.
    case tooManyFailedConnects = "auth.tooManyFailures"
    /// The device does not read its frames fast enough (its queue passed its bound); it is cut off at once.
    case slowConsumer = "courier.slowConsumer"
    /// The server is stopping: the device reconnects (to another node) and syncs.
    case shuttingDown = "server.shuttingDown"
    /// The app's backend deactivated the account (its devices cannot connect until it is reactivated).
    case accountDeactivated = "auth.accountDeactivated"
    /// The app's backend revoked the account's tokens: the device needs a new one.
    case tokenRevoked = "auth.tokenRevoked"
    /// The app's backend disconnected the device (it may connect again).
    case kicked = "session.kicked"
    /// The connection closed (nothing to tell the device).
    case closed

    /// The close frame's code: 1001 (going away) when the node stops, 1008 (policy violation) otherwise
    /// (docs/protocol.md).
    package var closeCode: UInt16 { self == .shuttingDown ? 1001 : 1008 }
}

/// When a session must end: its authentication deadline, its token's expiry, or an end requested by another part of
/// the session. The first reason wins and is handed to the session's ``onEnd(_:)`` handler. The deadlines, and the
/// wait for the device to answer a close frame, are timers on the connection's event loop, so an idle session holds
/// no task for them (a suspended task keeps a few KiB of memory: see docs/benchmarks-history.md).
package final class SessionControl: Sendable {
    private struct State {
        var ended: SessionEndReason?
        var handler: (@Sendable (SessionEndReason) -> Void)?
        /// The running clock: the authentication or token deadline while the session lasts, then the wait for the
        /// device to answer the close frame.
        var timer: Scheduled<Void>?
        /// The session is over: no clock runs any more.
        var stopped = false
    }

    private let state = Locked(State())
    private let eventLoop: any EventLoop

    /// Starts the authentication clock.
    package init(eventLoop: any EventLoop, authTimeout: Duration) {
        self.eventLoop = eventLoop
        schedule(.authTimeout, in: TimeAmount(authTimeout))
    }

    /// The session authenticated with a token valid until `expires`: the authentication clock stops, the token's
    /// starts.
    package func authenticated(until expires: Date) {
        // At most a year at a time: a token may claim any `exp` (the lifetime bound is optional).
        let remaining = max(0, min(expires.timeIntervalSinceNow, 365 * 86_400))
        schedule(.tokenExpired, in: .milliseconds(Int64(remaining * 1000)))
    }

    /// Ends the session for `reason` (ignored when it has ended already).
    package func end(_ reason: SessionEndReason) {
        let (handler, timer) = state.withLock { state -> ((@Sendable (SessionEndReason) -> Void)?, Scheduled<Void>?) in
            guard state.ended == nil else { return (nil, nil) }
            state.ended = reason
            defer {
                state.handler = nil
                state.timer = nil
            }
            return (state.handler, state.timer)
        }
        timer?.cancel()
        handler?(reason)
    }

    /// What the session does once it must end, called once with the first reason, on the thread that ended it (at
    /// once, if it has ended already).
    package func onEnd(_ handler: @escaping @Sendable (SessionEndReason) -> Void) {
        let ended = state.withLock { state -> SessionEndReason? in
            if state.ended == nil { state.handler = handler }
            return state.ended
        }
        if let ended { handler(ended) }
    }

    /// Runs `action` after `delay` unless the session is over by then (``stop()``): the wait for a device to answer
    /// the close frame.
    package func deadline(in delay: Duration, _ action: @escaping @Sendable () -> Void) {
        // Not once the session has stopped (on another thread): it would only hold the channel 10 s longer.
        replaceClock(with: eventLoop.scheduleTask(in: TimeAmount(delay)) { action() }, while: { !$0.stopped })
    }

    package var hasEnded: Bool { state.withLock { $0.ended != nil } }

    /// The server ended the session (for a reason other than the connection closing): requests read ahead are not
    /// run.
    package var dropsRequests: Bool { state.withLock { $0.ended.map { $0 != .closed } ?? false } }

    /// Stops the clocks (the session is over).
    package func stop() {
        end(.closed)
        state.withLock { state -> Scheduled<Void>? in
            state.stopped = true
            defer { state.timer = nil }
            return state.timer
        }?.cancel()
    }

    /// Replaces the running clock with one that ends the session for `reason` after `delay` (not once it has ended).
    private func schedule(_ reason: SessionEndReason, in delay: TimeAmount) {
        replaceClock(with: eventLoop.scheduleTask(in: delay) { [weak self] () -> Void in self?.end(reason) }) {
            $0.ended == nil
        }
    }

    /// Makes `timer` the running clock (cancelling the one it replaces) if `valid`, else cancels `timer`.
    private func replaceClock(with timer: Scheduled<Void>, while valid: (State) -> Bool) {
        let cancelled = state.withLock { state -> Scheduled<Void>? in
            guard valid(state) else { return timer }
            defer { state.timer = timer }
            return state.timer
        }
        cancelled?.cancel()
    }
}
