// Courier — Apache-2.0
import AsyncHTTPClient
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Files stored by Courier (ADR 0032, docs/media.md), through real HTTP on 127.0.0.1 against a server that
/// keeps them in a folder: what reaches the disk, who may fetch it, and what a recall leaves.
@Suite("Media", .timeLimit(.minutes(5)))
struct MediaTests {
    /// A server keeping files in `folder`, with a small size limit and an image/text type list.
    static func configure(_ folder: String) -> (inout CourierServerConfiguration) -> Void {
        { configuration in
            configuration.media = .init(place: .folder(folder), maxBytes: 64 * 1024, types: ["image/*", "text/plain"])
        }
    }

    @Test("a member uploads with its token; the other member and the app fetch the same bytes; an outsider and an unknown id get the same 404")
    func uploadAndFetch() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: Self.configure(folder.path)) { server in
            try await server.register("alice", "bob", "carol")
            let http = MediaHTTP(port: server.port)
            let bytes = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let alice = try await server.token(for: "alice")
            let upload = try await http.send("POST", "/v1/conversations/d:alice:bob/media", bearer: alice, body: bytes, type: "image/png")
            #expect(upload.status == 201, "\(upload.text)")
            let file = try JSONDecoder().decode(MediaFile.self, from: upload.body)
            #expect(file.url == "/v1/media/\(file.id)" && upload.headers["location"]?.first == file.url)
            #expect(file.size == bytes.count && file.contentType == "image/png" && file.uploader == "alice")
            // On disk, whole, under the folder.
            let onDisk = folder.path + "/\(file.id.dropFirst(3).prefix(2))/\(file.id)"
            #expect(FileManager.default.contents(atPath: onDisk) == bytes)

            let bob = try await http.send("GET", file.url, bearer: try await server.token(for: "bob"))
            #expect(bob.status == 200 && bob.body == bytes)
            #expect(bob.headers["content-type"]?.first == "image/png")
            #expect(bob.headers["etag"]?.first == "\"\(file.sha256)\"")
            #expect(bob.headers["x-content-type-options"]?.first == "nosniff")
            let app = try await http.send("GET", file.url, bearer: server.secret.value)
            #expect(app.status == 200 && app.body == bytes)
            let head = try await http.send("HEAD", file.url, bearer: alice)
            #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"]?.first == String(bytes.count))

            // Carol is no member: the answer is the one for a file that does not exist, byte for byte but the id.
            let carol = try await http.send("GET", file.url, bearer: try await server.token(for: "carol"))
            let unknown = try await http.send("GET", "/v1/media/md_" + String(repeating: "0", count: 32), bearer: alice)
            #expect(carol.status == 404 && unknown.status == 404)
            #expect(carol.code == "media.notFound" && carol.text == unknown.text)
            // She cannot upload into it either.
            let intrude = try await http.send(
                "POST", "/v1/conversations/d:alice:bob/media", bearer: try await server.token(for: "carol"), body: bytes, type: "image/png")
            #expect(intrude.status == 403 && intrude.code == "conversation.notAMember")
        }
    }

    @Test("refusals: past the size limit 413 media.tooLarge, a type not listed 415, no credentials 401; nothing is kept")
    func refusals() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: Self.configure(folder.path)) { server in
            try await server.register("alice", "bob")
            let http = MediaHTTP(port: server.port)
            let alice = try await server.token(for: "alice")
            let path = "/v1/conversations/d:alice:bob/media"
            let large = try await http.send("POST", path, bearer: alice, body: Data(count: 64 * 1024 + 1), type: "image/png")
            #expect(large.status == 413 && large.code == "media.tooLarge", "\(large.text)")
            // Without a Content-Length (chunked): refused when the bytes pass the limit.
            let streamed = try await http.send("POST", path, bearer: alice, body: Data(count: 200 * 1024), type: "image/png", chunked: true)
            #expect(streamed.status == 413 && streamed.code == "media.tooLarge", "\(streamed.text)")
            let html = try await http.send("POST", path, bearer: alice, body: Data("<script>".utf8), type: "text/html")
            #expect(html.status == 415 && html.code == "media.typeNotAllowed")
            let anonymous = try await http.send("POST", path, bearer: nil, body: Data("hi".utf8), type: "text/plain")
            #expect(anonymous.status == 401 && anonymous.code == "auth.invalidToken")
            let forged = try await http.send("POST", path, bearer: "not-a-token", body: Data("hi".utf8), type: "text/plain")
            #expect(forged.status == 401 && forged.code == "auth.invalidToken")
            let deleteByDevice = try await http.send("DELETE", "/v1/media/md_" + String(repeating: "1", count: 32), bearer: alice)
            #expect(deleteByDevice.status == 401)
            // A token revoked by the app's backend is refused as at a connect.
            // (Issued 5 s before: one issued in the revocation's second stays valid, ADR 0027.)
            let older = try await server.token(for: "alice", age: 5)
            #expect(try await server.rest("POST", "/v1/accounts/alice/revoke-tokens", body: "{}").status == 200)
            let revoked = try await http.send("POST", path, bearer: older, body: Data("hi".utf8), type: "text/plain")
            #expect(revoked.status == 401 && revoked.code == "auth.tokenRevoked", "\(revoked.text)")
            // Nothing stored: no file besides the (empty) incoming folder.
            let entries = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(entries == ["incoming"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/incoming").isEmpty)
        }
    }

    @Test("the app uploads only into a conversation that exists: an account never registered is 404 account.notFound, nothing kept")
    func appUploadIntoNothing() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: Self.configure(folder.path)) { server in
            try await server.register("bob")
            let http = MediaHTTP(port: server.port)
            let refused = try await http.send(
                "POST", "/v1/conversations/d:bob:nobody/media", bearer: server.secret.value, body: Data("x".utf8), type: "text/plain")
            #expect(refused.status == 404 && refused.code == "account.notFound", "\(refused.text)")
            let kept = FileManager.default.enumerator(atPath: folder.path)?.allObjects.compactMap { $0 as? String } ?? []
            #expect(!kept.contains { $0.contains("md_") }, "\(kept)")
            try await server.register("nobody")
            let accepted = try await http.send(
                "POST", "/v1/conversations/d:bob:nobody/media", bearer: server.secret.value, body: Data("x".utf8), type: "text/plain")
            #expect(accepted.status == 201)
        }
    }

    @Test("the app deletes a file: gone from disk when it answers 204, then 404 to everyone, and a second delete is 404")
    func appDeletes() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: Self.configure(folder.path)) { server in
            try await server.register("alice", "bob")
            let http = MediaHTTP(port: server.port)
            let upload = try await http.send(
                "POST", "/v1/conversations/d:alice:bob/media", bearer: server.secret.value, body: Data("x".utf8), type: "text/plain")
            let file = try JSONDecoder().decode(MediaFile.self, from: upload.body)
            #expect(file.uploader == nil)
            let path = folder.path + "/\(file.id.dropFirst(3).prefix(2))/\(file.id)"
            #expect(FileManager.default.fileExists(atPath: path))
            #expect(try await http.send("DELETE", file.url, bearer: server.secret.value).status == 204)
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(try await http.send("GET", file.url, bearer: server.secret.value).status == 404)
            let again = try await http.send("DELETE", file.url, bearer: server.secret.value)
            #expect(again.status == 404 && again.code == "media.notFound")
        }
    }

    @Test("a two-way recall of the message that carries a file deletes it before the recall answers; a one-way recall keeps it for its sender")
    func recallDeletes() async throws {
        let folder = try TemporaryFolder()
        try await withTestServer(configure: Self.configure(folder.path)) { server in
            try await server.register("alice", "bob")
            let http = MediaHTTP(port: server.port)
            let alice = try await server.token(for: "alice")
            var files: [MediaFile] = []
            var messages: [String] = []
            for index in 0..<2 {
                let upload = try await http.send(
                    "POST", "/v1/conversations/d:alice:bob/media", bearer: alice, body: Data("picture \(index)".utf8), type: "text/plain")
                let file = try JSONDecoder().decode(MediaFile.self, from: upload.body)
                files.append(file)
                let body = #"{"from":"alice","clientId":"c\#(index)","body":"look","ext":{"image":"http://example.test\#(file.url)"}}"#
                let (status, reply) = try await server.restResponse("POST", "/v1/conversations/d:alice:bob/messages", body: body)
                #expect(status == 201 || status == 200, "\(String(decoding: reply, as: UTF8.self))")
                let ack = try #require(try JSONSerialization.jsonObject(with: reply) as? [String: Any])
                messages.append(try #require((ack["message"] as? [String: Any])?["id"] as? String))
            }
            let paths = files.map { folder.path + "/\($0.id.dropFirst(3).prefix(2))/\($0.id)" }
            #expect(paths.allSatisfy { FileManager.default.fileExists(atPath: $0) })

            let twoWay = try await server.rest("POST", "/v1/conversations/d:alice:bob/recall", body: #"{"messageId":"\#(messages[0])","mode":"twoWay"}"#)
            #expect(twoWay.status == 200, "\(twoWay)")
            #expect(!FileManager.default.fileExists(atPath: paths[0]))
            #expect(try await http.send("GET", files[0].url, bearer: alice).status == 404)

            let oneWay = try await server.rest("POST", "/v1/conversations/d:alice:bob/recall", body: #"{"messageId":"\#(messages[1])","mode":"oneWay"}"#)
            #expect(oneWay.status == 200, "\(oneWay)")
            #expect(FileManager.default.fileExists(atPath: paths[1]))
            #expect(try await http.send("GET", files[1].url, bearer: alice).status == 200)
        }
    }
}

/// What the upload answers.
struct MediaFile: Decodable {
    let id: String
    let url: String
    let conversation: String
    let uploader: String?
    let contentType: String
    let size: Int
    let sha256: String
}

/// Raw HTTP for the media endpoints (any bearer, bytes in and out, redirects not followed), with AsyncHTTPClient.
struct MediaHTTP {
    let base: String

    init(port: Int) { base = "http://127.0.0.1:\(port)" }
    init(base: String) { self.base = base }

    struct Answer {
        let status: Int
        /// By lowercase name.
        let headers: [String: [String]]
        let body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        var code: String? {
            (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["code"] as? String
        }
    }

    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(redirectConfiguration: .disallow)
    )

    func send(
        _ method: String,
        _ path: String,
        bearer: String?,
        body: Data? = nil,
        type: String? = nil,
        chunked: Bool = false
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: path.hasPrefix("http") ? path : base + path)
        request.method = .init(rawValue: method)
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        if let type { request.headers.add(name: "Content-Type", value: type) }
        if let body {
            if chunked {
                let chunks = stride(from: 0, to: body.count, by: 8192).map {
                    ByteBuffer(bytes: body[$0..<min($0 + 8192, body.count)])
                }
                request.body = .stream(chunks.async, length: .unknown)
            } else {
                request.body = .bytes(ByteBuffer(bytes: body))
            }
        }
        let response = try await Self.client.execute(request, timeout: .seconds(60))
        let collected = try await response.body.collect(upTo: 64 << 20)
        var headers: [String: [String]] = [:]
        for header in response.headers { headers[header.name.lowercased(), default: []].append(header.value) }
        return Answer(status: Int(response.status.code), headers: headers, body: Data(collected.readableBytesView))
    }
}

extension Array where Element: Sendable {
    /// The elements as an async sequence.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}
