// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
package import CourierWire

/// Devices' push tokens: registered over the wire by the device itself, read by the app's backend over REST (it sends
/// the pushes; Courier stores no push credentials).
package struct PushTokenService: Sendable {
    /// The longest token accepted (APNs tokens are 64 hex characters today, FCM's about 160; both may grow).
    static let maxTokenLength = 4096
    let store: any CourierStore
    let now: @Sendable () -> Timestamp

    package func register(
        _ request: PushTokenRequest,
        from device: DeviceContext) async throws(RequestError
    ) -> PushTokenAck {
        var token: PushToken?
        if let value = request.token {
            guard let platform = request.platform, PushPlatform.all.contains(platform) else {
                throw RequestError(.invalidArgument, "platform must be one of: apns, fcm.")
            }
            guard (1...Self.maxTokenLength).contains(value.utf8.count), value.utf8.allSatisfy({ (33...126).contains($0) })
            else {
                throw RequestError(
                    .invalidArgument,
                    "token must be 1–\(Self.maxTokenLength) printable ASCII characters without spaces."
                )
            }
            token = PushToken(
                device: device.device,
                platform: platform,
                token: value,
                sandbox: request.sandbox ?? false,
                updatedAt: now()
            )
        }
        // Two devices registering the same token at once: the loser of the uniqueness race tries again and wins.
        for attempt in 1...3 {
            do {
                try await store.setPushToken(token, of: device.account, device: device.device)
                break
            } catch .conflict where attempt < 3 {
                continue
            } catch {
                throw RequestError(error)
            }
        }
        return PushTokenAck(registered: token != nil)
    }
}
