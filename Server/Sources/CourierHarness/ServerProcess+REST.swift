// Courier — Apache-2.0
public import CourierWire
public import Foundation

#if canImport(FoundationNetworking)
internal import FoundationNetworking
#endif

extension ServerProcess {
    /// A REST call with the app secret: the status and the body.
    public func rest(_ method: String, _ path: String, json: Data? = nil) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: httpURL + path)!)
        request.httpMethod = method
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = json
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    /// Registers accounts through `POST /v1/accounts` (at most 1,000 at a time).
    public func register(_ accounts: [AccountID]) async throws {
        let (status, _) = try await rest("POST", "/v1/accounts", json: try JSONEncoder().encode(["accounts": accounts]))
        guard status == 204 else { throw HarnessError.refused("POST /v1/accounts answered \(status)") }
    }
}
