// Courier — Apache-2.0
import CourierHarness
import CourierSDK
import CourierServer
import CourierTestSupport
import CourierWire
import Foundation
import Testing

/// Files in an S3-compatible bucket shared by two nodes on one PostgreSQL (ADR 0032): moto's server (PyPI),
/// started by the test on 127.0.0.1, is the bucket.
@Suite("Media in an S3-compatible bucket", .timeLimit(.minutes(5)))
struct MediaS3Tests {
    @Test(
        "an upload through one node is fetched through the other by a presigned redirect; an outsider gets 404; a recall through the other node deletes the object",
        .enabled(if: PostgresTestDatabase.isAvailable, "needs COURIER_TEST_POSTGRES_URL"),
        .enabled(if: MotoServer.isInstalled, "needs moto_server (pip install 'moto[server]')")
    )
    func twoNodes() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stop() }
        let direct = MediaHTTP(base: moto.url)
        #expect(try await direct.send("PUT", "/courier-media", bearer: nil).status == 200)
        let incoming = try TemporaryFolder()
        let bucket = S3Settings(
            endpoint: moto.url, bucket: "courier-media", region: "us-east-1", accessKeyID: "test", secretAccessKey: "test"
        )
        try await PostgresTestDatabase.withDatabase { url in
            try await withTwoNodes(on: url, configure: { $0.media = .init(place: .s3(bucket, incoming: incoming.path)) }) {
                nodeA, nodeB in
                try await nodeA.server.register("alice", "bob", "carol")
                let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
                let upload = try await MediaHTTP(port: nodeA.server.port).send(
                    "POST", "/v1/conversations/d:alice:bob/media", bearer: try await nodeA.server.token(for: "alice"),
                    body: bytes, type: "image/jpeg")
                #expect(upload.status == 201, "\(upload.text)")
                let file = try JSONDecoder().decode(MediaFile.self, from: upload.body)
                // Nothing left in the incoming folder: the bytes are in the bucket (moto refuses unsigned reads, so
                // the presigned address below is how they are read).
                let object = "/courier-media/media/\(file.id)"
                #expect(try FileManager.default.contentsOfDirectory(atPath: incoming.path).isEmpty)

                let throughB = MediaHTTP(port: nodeB.server.port)
                let bob = try await throughB.send("GET", file.url, bearer: try await nodeB.server.token(for: "bob"))
                #expect(bob.status == 302)
                let location = try #require(bob.headers["location"]?.first)
                #expect(location.hasPrefix(moto.url + object + "?") && location.contains("X-Amz-Signature="))
                let redirected = try await MediaHTTP(base: "").send("GET", location, bearer: nil)
                #expect(redirected.status == 200 && redirected.body == bytes)
                // The SDK follows the redirect itself, without the token (a bucket refuses a second authorization).
                let bobsClient = try await nodeB.server.connectedClient("bob")
                #expect(try await bobsClient.mediaData(at: URL(string: "http://127.0.0.1:\(nodeB.server.port)\(file.url)")!) == bytes)
                let carol = try await throughB.send("GET", file.url, bearer: try await nodeB.server.token(for: "carol"))
                #expect(carol.status == 404 && carol.code == "media.notFound")

                // A message through node A refers to it; its two-way recall through node B deletes the object.
                let body = #"{"from":"alice","clientId":"pic","body":"look: \#(file.url)"}"#
                let (status, reply) = try await nodeA.server.restResponse("POST", "/v1/conversations/d:alice:bob/messages", body: body)
                #expect(status == 201 || status == 200)
                let ack = try #require(try JSONSerialization.jsonObject(with: reply) as? [String: Any])
                let message = try #require((ack["message"] as? [String: Any])?["id"] as? String)
                let recall = try await nodeB.server.rest(
                    "POST", "/v1/conversations/d:alice:bob/recall", body: #"{"messageId":"\#(message)"}"#)
                #expect(recall.status == 200)
                // The address signed before the recall still is valid: the object behind it is gone.
                let gone = try await MediaHTTP(base: "").send("GET", location, bearer: nil)
                #expect(gone.status == 404 && gone.text.contains("NoSuchKey"), "\(gone.text)")
                #expect(try await throughB.send("GET", file.url, bearer: try await nodeB.server.token(for: "bob")).status == 404)
            }
        }
    }
}

/// moto's S3-compatible server on a free port of 127.0.0.1 (it refuses unsigned reads; `S3PresignTests` checks our
/// signatures against AWS's own example).
struct MotoServer {
    let process: ChildProcess
    let url: String

    static var isInstalled: Bool { executable != nil }

    static var executable: String? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        return paths.map { "\($0)/moto_server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func start() async throws -> MotoServer {
        let port = try await freePort()
        // Its "Running on" line goes to standard error: the shell sends both to the pipe.
        let process = try ChildProcess(
            "/bin/sh",
            ["-c", "exec '\(executable ?? "moto_server")' -H 127.0.0.1 -p \(port) 2>&1"],
            captureOutput: true
        )
        guard process.readLine(where: { $0.contains("Running on") }) != nil else {
            process.signal(SIGKILL)
            _ = process.wait()
            throw MotoError()
        }
        return MotoServer(process: process, url: "http://127.0.0.1:\(port)")
    }

    func stop() {
        process.signal(SIGKILL)
        _ = process.wait()
    }

    struct MotoError: Error {}
}
