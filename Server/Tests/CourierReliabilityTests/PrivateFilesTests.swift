// Courier — Apache-2.0
import CourierHarness
import CourierWire
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What Courier writes, others on the host cannot read: checked on disk after a real server
/// started, stored a message and an uploaded file, was backed up and restored — every folder 0700, every file 0600 —
/// and a data folder another tool made readable is reported at start.
@Suite("Private files of a real server", .timeLimit(.minutes(3)))
struct PrivateFilesTests {
    /// `path`'s permission bits.
    static func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int) ?? -1
    }

    /// Every path under `folder` whose mode is not 0700 (folders) or 0600 (files), with its mode.
    static func loose(under folder: String) -> [String] {
        var found: [String] = []
        for case let entry as String in FileManager.default.enumerator(atPath: folder) ?? .init() {
            let path = folder + "/" + entry
            var isFolder: ObjCBool = false
            FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
            let expected = isFolder.boolValue ? 0o700 : 0o600
            if mode(path) != expected { found.append("\(entry) \(String(mode(path), radix: 8))") }
        }
        return found
    }

    func courierServer(_ arguments: [String]) throws -> Int32 {
        try ChildProcess(Binaries.courierServer, arguments).wait()
    }

    @Test("the database, its WAL, the app secret, media, a backup and a restore's set-aside folder are 0600 in 0700 folders")
    func modesOnDisk() async throws {
        let parent = NSTemporaryDirectory() + "courier-private-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: parent) }
        // The harness makes the data folder as any tool would (0755 here): the server says so at start.
        let folder = parent + "/data"
        let server = try ServerProcess(.init(binary: Binaries.courierServer, folder: folder, logLevel: "info"), secret: Binaries.secret)
        try await server.register(["alice", "bob"])
        let sent = try await server.withClient("alice") { client in
            let send = SendRequest(conversation: .direct("alice", "bob"), clientID: "c-1", body: "hello")
            guard case .ack = try await client.request({ .send($0, send) }) else { return false }
            return true
        }
        #expect(sent)
        var upload = URLRequest(url: URL(string: server.httpURL + "/v1/conversations/d:alice:bob/media")!)
        upload.httpMethod = "POST"
        upload.setValue("Bearer \(try await Binaries.token(for: "alice"))", forHTTPHeaderField: "Authorization")
        upload.setValue("image/png", forHTTPHeaderField: "Content-Type")
        upload.httpBody = Data(repeating: 7, count: 10_000)
        let (_, response) = try await URLSession.shared.data(for: upload)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)

        let backup = parent + "/backup.sqlite"
        #expect(try courierServer(["backup", backup, "--data-dir", folder]) == 0)
        #expect(server.stop() == 0)
        let log = try String(contentsOfFile: folder + "/server.log", encoding: .utf8)
        #expect(log.contains("Others on this host can read 1 path(s) in the data folder") && log.contains(folder))
        #expect(try courierServer(["restore", backup, "--data-dir", folder]) == 0)

        let entries = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(entries.contains("courier.sqlite") && entries.contains("media"))
        #expect(entries.contains { $0.hasPrefix("before-restore-") })
        #expect(FileManager.default.enumerator(atPath: folder + "/media")?.allObjects.isEmpty == false, "the upload is on disk")
        #expect(Self.loose(under: folder) == [])
        #expect(Self.mode(backup) == 0o600)

        // A data folder the server makes itself is 0700, and the app secret it creates there 0600.
        let fresh = parent + "/fresh"
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_APP_SECRET"] = nil
        let started = try ChildProcess(
            Binaries.courierServer,
            ["serve", "--port", "0", "--data-dir", fresh],
            environment: environment,
            captureOutput: true
        )
        #expect(started.readLine { $0.contains("listening on") } != nil)
        started.signal(SIGTERM)
        #expect(started.wait() == 0)
        #expect(Self.mode(fresh) == 0o700 && Self.mode(fresh + "/app-secret") == 0o600)
        #expect(Self.loose(under: fresh) == [])
    }
}
