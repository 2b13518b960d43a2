// Courier — Apache-2.0
public import Foundation
internal import CourierWire

extension CourierClient {
    /// Registers this device's APNs token, so that your backend can push to it: the server keeps one token per device
    /// and hands it to your backend (`GET /v1/accounts/{id}/push-tokens`), which sends the pushes — recall notices
    /// carry `pushText` and `pushPayload` for replacing a shown notification.
    ///
    /// Call it from `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)` on every launch. Sent at once
    /// when connected, else on the next connection. NIM `updateApnsToken`, Agora `bindDeviceToken`, RongCloud
    /// `setDeviceTokenData`.
    ///
    /// - Parameters:
    ///   - deviceToken: The token as APNs gives it; sent as lowercase hex.
    ///   - sandbox: A development build's token (APNs sandbox environment).
    /// - Throws: ``CourierError/invalidInput(code:message:)`` when the server refuses the token;
    ///   ``CourierError/timedOut``.
    public func registerPushToken(apns deviceToken: Data, sandbox: Bool = false) async throws {
        let hex = deviceToken.map { String(format: "%02x", $0) }.joined()
        try await setPushToken(PushTokenRequest(platform: .apns, token: hex, sandbox: sandbox))
    }

    /// Registers this device's Firebase Cloud Messaging token, like ``registerPushToken(apns:sandbox:)``.
    public func registerPushToken(fcm token: String) async throws {
        try await setPushToken(PushTokenRequest(platform: .fcm, token: token))
    }

    /// Removes this device's push token (the user signed out, or turned notifications off).
    public func unregisterPushToken() async throws {
        try await setPushToken(PushTokenRequest(platform: nil, token: nil))
    }

    private func setPushToken(_ request: PushTokenRequest) async throws {
        state.withLock { $0.pushToken = request }
        guard let link = state.withLock({ $0.link }) else { return }
        try await flushPushToken(on: link)
    }

    /// Sends the push token set last, if the server does not have it yet.
    func flushPushToken(on link: Link) async throws {
        guard let request = state.withLock({ $0.pushToken }) else { return }
        let reply = try await link.request { .pushToken($0, request) }
        if case .success(.pushToken) = reply {} else if case .failure = reply {} else { throw CourierError.unexpectedReply }
        // Settled either way: a refused token is not retried on every connection.
        state.withLock { if $0.pushToken == request { $0.pushToken = nil } }
        if case .failure(let error) = reply { throw CourierError(error) }
    }
}
