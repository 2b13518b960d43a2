// Courier — Apache-2.0
internal import CourierStorage
internal import CourierDomain
internal import CourierWire
internal import Crypto
internal import Foundation
internal import NIOCore

/// Signs webhook deliveries per the Standard Webhooks specification: `webhook-signature` is `v1,` and the base64
/// HMAC-SHA256 of `id.timestamp.body` under the secret's key (the base64 after `whsec_`), one per secret during a
/// rotation, separated by spaces.
enum WebhookSigner {
    static let prefix = "whsec_"

    /// A new secret: `whsec_` and the base64 of 32 random bytes.
    static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return prefix + Data(bytes).base64EncodedString()
    }

    static func signature(secrets: [String], id: String, timestamp: Int64, body: String) -> String {
        let content = Data("\(id).\(timestamp).\(body)".utf8)
        return secrets.compactMap { secret -> String? in
            guard let key = Data(base64Encoded: String(secret.dropFirst(prefix.count))) else { return nil }
            let code = HMAC<SHA256>.authenticationCode(for: content, using: SymmetricKey(data: key))
            return "v1," + Data(code).base64EncodedString()
        }.joined(separator: " ")
    }
}
