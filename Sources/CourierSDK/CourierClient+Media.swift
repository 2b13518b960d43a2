// Courier — Apache-2.0
public import Foundation
#if canImport(FoundationNetworking)
internal import FoundationNetworking
#endif
internal import CourierWire

extension CourierClient {
    /// The bytes of a file the Courier server stores (docs/media.md) — the `url` of an attachment the default uploader
    /// put there — fetched with this account's token, which a plain image loader cannot send. Where the server keeps
    /// files in a bucket it answers with a short-lived address, fetched without the token. Only members of the file's
    /// conversation may fetch it. NIM `NIMResourceManager.download`, Agora `downloadAttachment`, RongCloud
    /// `downloadMediaMessage`.
    ///
    /// - Throws: ``CourierError/server(code:message:)`` with `media.notFound` for a file that is not yours to fetch or
    ///   is gone (a two-way recall deletes it); ``CourierError/unauthorized(_:)`` for a refused token;
    ///   ``CourierError/noAccount`` before the client first connected (it has no token yet).
    public func mediaData(at url: URL) async throws -> Data {
        guard let credentials = state.withLock({ $0.credentials }) else { throw CourierError.noAccount }
        var request = URLRequest(url: url)
        request.setValue("Bearer \(try await credentials.token())", forHTTPHeaderField: "Authorization")
        let (body, response) = try await MediaSession.withoutRedirects.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        switch status {
        case 200:
            return body
        case 301, 302, 303, 307, 308:
            // A presigned address: the token must not go there (a bucket refuses two kinds of authorization).
            guard let location = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Location"),
                let next = URL(string: location, relativeTo: url)
            else { throw CourierError.server(code: .internal, message: "A redirect without an address.") }
            let (bytes, answer) = try await MediaSession.withoutRedirects.data(for: URLRequest(url: next))
            let code = (answer as? HTTPURLResponse)?.statusCode ?? 0
            guard code == 200 else { throw CourierError.server(code: .mediaNotFound, message: "The file's storage answered \(code).") }
            return bytes
        default:
            struct Problem: Decodable {
                let code: ErrorCode
                let detail: String
            }
            guard let problem = try? JSONDecoder().decode(Problem.self, from: body) else {
                throw CourierError.server(code: .internal, message: "The server answered \(status).")
            }
            throw CourierError(WireError(code: problem.code, message: problem.detail))
        }
    }
}

/// A URL session that does not follow redirects (the media fetch follows them itself, without the token).
enum MediaSession {
    final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest,
            completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }
    }

    static let withoutRedirects = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
}
