// Courier — Apache-2.0
internal import CourierStorage
internal import Foundation

/// Why the server ends a session by itself; the reason is the WebSocket close frame's reason (close code 1008).
enum SessionEndReason: String, Sendable {
    /// No successful `connect` within the authentication time.
    case authTimeout = "auth.timeout"
    /// The token the session authenticated with has expired (the device gets `auth.tokenExpired` first).
    case tokenExpired = "auth.tokenExpired"
    /// Too many failed `connect`s on this connection.
    case tooManyFailedConnects = "auth.tooManyFailures"
    /// The device does not read its frames fast enough (its queue passed its bound); it is cut off at once.
    case slowConsumer = "courier.slowConsumer"
    /// The connection closed, or the server is stopping (nothing to tell the device).
    case closed
}

/// When a session must end: its authentication deadline, its token's expiry, or an end requested by another part of
/// the session. The first reason wins.
final class SessionControl: Sendable {
    private struct State {
        var expires: Date?
        var ended: SessionEndReason?
        var waiter: CheckedContinuation<SessionEndReason, Never>?
        var authenticationWaiter: CheckedContinuation<Date?, Never>?
        var authenticationAbandoned = false
    }

    private let state = Locked(State())

    /// The session authenticated with a token valid until `expires`.
    func authenticated(until expires: Date) {
        let waiter = state.withLock { state -> CheckedContinuation<Date?, Never>? in
            state.expires = expires
            defer { state.authenticationWaiter = nil }
            return state.authenticationWaiter
        }
        waiter?.resume(returning: expires)
    }

    /// Ends the session for `reason` (ignored when it has ended already).
    func end(_ reason: SessionEndReason) {
        let waiter = state.withLock { state -> CheckedContinuation<SessionEndReason, Never>? in
            guard state.ended == nil else { return nil }
            state.ended = reason
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: reason)
    }

    var hasEnded: Bool { state.withLock { $0.ended != nil } }

    /// Runs the session's clocks until it must end; returns why. Cancellable (the session's task tree ends it).
    func run(authTimeout: Duration) async -> SessionEndReason {
        // Cancelled and awaited when this returns.
        async let _ = watch(authTimeout: authTimeout)
        return await ended()
    }

    /// Ends the session when it is not authenticated within `authTimeout`, then when its token expires.
    private func watch(authTimeout: Duration) async {
        let expires = await withTaskGroup(of: Date?.self) { group in
            group.addTask { await self.authentication() }
            group.addTask {
                try? await Task.sleep(for: authTimeout)
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        guard !Task.isCancelled else { return }
        // A connect that succeeded just as the time ran out still counts.
        guard let expires = expires ?? state.withLock({ $0.expires }) else { return end(.authTimeout) }
        // At most a year at a time: a token may claim any `exp` (the lifetime bound is optional).
        let remaining = min(expires.timeIntervalSinceNow, 365 * 86_400)
        do {
            if remaining > 0 { try await Task.sleep(for: .milliseconds(Int64(remaining * 1000))) }
            end(.tokenExpired)
        } catch {
            // Cancelled: the session ended for another reason.
        }
    }

    /// The token's expiry once the session has authenticated; `nil` when cancelled first.
    private func authentication() async -> Date? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Date?? in
                    if let expires = state.expires { return .some(expires) }
                    if state.authenticationAbandoned { return .some(nil) }
                    state.authenticationWaiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Date?, Never>? in
                state.authenticationAbandoned = true
                defer { state.authenticationWaiter = nil }
                return state.authenticationWaiter
            }
            waiter?.resume(returning: nil)
        }
    }

    private func ended() async -> SessionEndReason {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let reason = state.withLock { state -> SessionEndReason? in
                    if let ended = state.ended { return ended }
                    state.waiter = continuation
                    return nil
                }
                if let reason { continuation.resume(returning: reason) }
            }
        } onCancel: {
            end(.closed)
        }
    }
}
