// Courier — Apache-2.0
internal import Crypto
internal import Foundation

/// Signs webhook deliveries per the Standard Webhooks specification: `webhook-signature` is `v1,` and the base64
/// HMAC-SHA256 of `id.timestamp.body` under the secret's key (the base64 after `whsec_`), one per secret during a
/// rotation, separated by spaces.
package enum WebhookSigner {
    static let prefix = "whsec_"

    /// A new secret: `whsec_` and the base64 of 32 random bytes.
    package static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return prefix + Data(bytes).base64EncodedString()
    }

    /// The keys of `secrets` (the base64 after `whsec_`), decoded once for the requests of a batch.
    static func keys(_ secrets: [String]) -> [SymmetricKey] {
        secrets.compactMap { secret in
            Data(base64Encoded: String(secret.dropFirst(prefix.count))).map { SymmetricKey(data: $0) }
        }
    }

    static func signature(keys: [SymmetricKey], id: String, timestamp: Int64, body: String) -> String {
        keys.map { key in
            var hmac = HMAC<SHA256>(key: key)
            hmac.update(data: Array("\(id).\(timestamp).".utf8))
            hmac.update(data: Array(body.utf8))
            return "v1," + Data(hmac.finalize()).base64EncodedString()
        }.joined(separator: " ")
    }
}
