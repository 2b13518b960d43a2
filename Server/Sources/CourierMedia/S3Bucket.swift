// Courier — Apache-2.0
internal import AsyncHTTPClient
internal import Crypto
internal import Foundation
internal import NIOCore
internal import NIOHTTP1
internal import _NIOFileSystem
internal import CourierServerCore

/// Presigned URLs (AWS Signature Version 4, query parameters, `UNSIGNED-PAYLOAD`), signed with swift-crypto: what
/// the server uses to put and delete objects, and what a device is redirected to for a fetch. Checked against the
/// example AWS publishes for this scheme (`S3PresignTests`).
struct S3Presigner: Sendable {
    let settings: S3Settings

    /// A URL that lets anyone holding it `method` the object `key` for `expires` seconds from `now`.
    func url(_ method: String, key: String, expires: Int, now: Date = Date()) -> String {
        let endpoint = URLComponents(string: settings.endpoint)
        let scheme = endpoint?.scheme ?? "https"
        var host = endpoint?.host ?? settings.endpoint
        // A default port is not part of the Host header the client sends, so not of what is signed either.
        if let port = endpoint?.port, port != (scheme == "https" ? 443 : 80) { host += ":\(port)" }
        let encodedKey = key.split(separator: "/", omittingEmptySubsequences: false).map { Self.encode(String($0)) }
            .joined(separator: "/")
        let path: String
        if settings.pathStyle {
            path = "/\(Self.encode(settings.bucket))/\(encodedKey)"
        } else {
            host = "\(settings.bucket).\(host)"
            path = "/\(encodedKey)"
        }
        let (date, day) = Self.timestamps(now)
        let scope = "\(day)/\(settings.region)/s3/aws4_request"
        let query = [
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
            ("X-Amz-Credential", "\(settings.accessKeyID)/\(scope)"),
            ("X-Amz-Date", date),
            ("X-Amz-Expires", String(expires)),
            ("X-Amz-SignedHeaders", "host"),
        ].map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.sorted().joined(separator: "&")
        let canonicalRequest = [method, path, query, "host:\(host)", "", "host", "UNSIGNED-PAYLOAD"]
            .joined(separator: "\n")
        let stringToSign = [
            "AWS4-HMAC-SHA256", date, scope, SHA256.hash(data: Data(canonicalRequest.utf8)).lowercaseHex,
        ].joined(separator: "\n")
        var key = SymmetricKey(data: Data("AWS4\(settings.secretAccessKey)".utf8))
        for part in [day, settings.region, "s3", "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key).lowercaseHex
        return "\(scheme)://\(host)\(path)?\(query)&X-Amz-Signature=\(signature)"
    }

    /// `20130524T000000Z` and `20130524`, in UTC.
    static func timestamps(_ now: Date) -> (String, String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: now)
        let day = String(format: "%04d%02d%02d", c.year!, c.month!, c.day!)
        return (day + String(format: "T%02d%02d%02dZ", c.hour!, c.minute!, c.second!), day)
    }

    /// URI-encodes every byte but the unreserved ones (`A–Z a–z 0–9 - . _ ~`), as SigV4 requires.
    static func encode(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.append(Character(Unicode.Scalar(byte)))
            default:
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }
}

/// Files in an S3-compatible bucket, shared by every node: uploads arrive on the node (in a folder of its data folder),
/// are put into the bucket with a presigned `PUT`, and a fetch is redirected to a presigned `GET` that expires in
/// five minutes. Objects are named by the file's id under `media/`.
struct S3MediaFiles: MediaFiles {
    let presigner: S3Presigner
    let incomingFolder: String
    /// The process's shared client: nothing to shut down.
    var client: HTTPClient { .shared }
    /// How long a fetch's redirect stays valid.
    static let fetchSeconds = 300

    init(settings: S3Settings, incomingFolder: String) {
        presigner = S3Presigner(settings: settings)
        self.incomingFolder = incomingFolder
        IncomingFolder.prepare(incomingFolder)
    }

    static func key(of id: String) -> String { "media/\(id)" }

    func store(_ id: String, from file: String, contentType: String) async throws {
        defer { try? FileManager.default.removeItem(atPath: file) }
        let handle = try await FileSystem.shared.openFile(forReadingAt: .init(file))
        do {
            let size = try await handle.info().size
            var request = HTTPClientRequest(url: presigner.url("PUT", key: Self.key(of: id), expires: 300))
            request.method = .PUT
            request.headers.add(name: "Content-Type", value: contentType)
            // Streamed from the file, not held in memory.
            request.body = .stream(handle.readChunks(), length: .known(Int64(size)))
            try await send(request, expecting: 200..<300)
            try await handle.close()
        } catch {
            try? await handle.close()
            throw error
        }
    }

    func fetch(_ id: String, contentType: String) async throws -> MediaFetch {
        .redirect(presigner.url("GET", key: Self.key(of: id), expires: Self.fetchSeconds))
    }

    func delete(_ id: String) async throws {
        var request = HTTPClientRequest(url: presigner.url("DELETE", key: Self.key(of: id), expires: 60))
        request.method = .DELETE
        // 404: gone already.
        try await send(request, expecting: 200..<300, orNotFound: true, timeout: .seconds(10))
    }

    private func send(
        _ request: HTTPClientRequest,
        expecting statuses: Range<UInt>,
        orNotFound: Bool = false,
        timeout: TimeAmount = .seconds(300)
    ) async throws {
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 64 * 1024)
        let code = response.status.code
        guard statuses.contains(code) || (orNotFound && code == 404) else {
            throw S3Error(status: Int(code), body: String(buffer: body).prefix(300).description)
        }
    }
}

struct S3Error: Error, CustomStringConvertible {
    let status: Int
    let body: String
    var description: String { "S3 answered \(status): \(body)" }
}
